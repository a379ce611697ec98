// Package naming derives the stable, length-bounded names nodekit-cni gives kernel and disk objects
// (veths, iptables chains, state files) from runtime-chosen strings, so every command finds them again
// without saved state.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Hash returns prefix followed by the first n bytes (2n hex digits) of the SHA-256 of parts joined by NUL.
func Hash(prefix string, n int, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + hex.EncodeToString(h[:n])
}
