package systemd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

func TestManagerAddresses(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name string
		euid int
		env  map[string]string
		want []ManagerAddress
	}{
		{"root", 0, nil, []ManagerAddress{{systemBusAddress, true}, {systemPrivateAddress, false}}},
		{"root, bus address overridden", 0, map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/x"},
			[]ManagerAddress{{"unix:path=/x", true}, {systemPrivateAddress, false}}},
		{"user", 1000, map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"},
			[]ManagerAddress{{"unix:path=/run/user/1000/systemd/private", false}, {"unix:path=/run/user/1000/bus", true}}},
		{"user with a session bus", 1000, map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/s"},
			[]ManagerAddress{{"unix:path=/run/user/1000/systemd/private", false}, {"unix:path=/s", true}}},
		{"user without a runtime dir", 1000, nil, nil},
	} {
		if got := managerAddresses(tc.euid, env(tc.env)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: managerAddresses = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A bus that accepts the connection but never answers must not hold Connect past its ctx.
func TestDialManagerHonoursContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	conn, err := dialManager(ctx, ManagerAddress{"unix:path=" + sock, true})
	if err == nil {
		conn.Close()
		t.Fatal("dialManager to a mute bus succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dialManager to a mute bus = %v, want the context's deadline", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("dialManager returned after %v, long after its 300ms deadline", took)
	}
}

func TestAvailableHere(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := Available(ctx)
	if _, statErr := os.Stat(systemdRunDir); statErr != nil {
		if !errors.Is(err, ErrNoSystemd) {
			t.Errorf("Available() without %s = %v, want ErrNoSystemd", systemdRunDir, err)
		}
	} else if errors.Is(err, ErrNoSystemd) {
		t.Errorf("Available() with %s = %v", systemdRunDir, err)
	}
}

func TestDBusErrorTranslation(t *testing.T) {
	for name, want := range map[string]error{
		"org.freedesktop.systemd1.UnitExists":                         ErrUnitExists,
		"org.freedesktop.systemd1.NoSuchUnit":                         ErrNoSuchUnit,
		"org.freedesktop.DBus.Error.AccessDenied":                     ErrAccessDenied,
		"org.freedesktop.DBus.Error.InteractiveAuthorizationRequired": ErrAccessDenied,
		"org.freedesktop.DBus.Error.ServiceUnknown":                   ErrBusUnavailable,
	} {
		for _, in := range []error{dbus.Error{Name: name}, &dbus.Error{Name: name}} {
			got := dbusError(in)
			if !errors.Is(got, want) {
				t.Errorf("dbusError(%s) = %v, want %v", name, got, want)
			}
			var de dbus.Error
			var dp *dbus.Error
			if !errors.As(got, &de) && !errors.As(got, &dp) {
				t.Errorf("dbusError(%s) lost the D-Bus error", name)
			}
		}
	}
	plain := errors.New("x")
	if dbusError(plain) != plain {
		t.Error("dbusError changed a non-D-Bus error")
	}
}
