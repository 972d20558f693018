// Package docs tests the repository's own documentation: every rule that code, tests and docs
// cite as "(D7)" or "D8a" has its section in the design record, docs/design.md (D12), and
// README links that record.
package docs
