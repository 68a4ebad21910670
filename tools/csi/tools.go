//go:build tools

// Pins the Kubernetes CSI sidecars that hack/cluster.sh runs beside the local cluster's
// expandable host-path driver (./hostpath): the provisioner creates and deletes its volumes, the
// resizer expands them when a claim asks for more.
package tools

import (
	_ "github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner"
	_ "github.com/kubernetes-csi/external-resizer/cmd/csi-resizer"
)
