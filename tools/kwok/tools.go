//go:build tools

// Pins kwok, which simulates nodes and pods for the controller-at-scale benchmark.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
