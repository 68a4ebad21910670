//go:build tools

// Pins local-path-provisioner, which hack/cluster.sh runs as the dynamic provisioner of the
// local cluster's default StorageClass.
package tools

import _ "github.com/rancher/local-path-provisioner"
