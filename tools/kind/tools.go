//go:build tools

// Pins kind, which kind/up.sh runs to create a cluster of node containers.
package tools

import _ "sigs.k8s.io/kind"
