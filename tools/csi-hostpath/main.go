// A small CSI driver for the local cluster whose volumes can grow: each volume is a directory
// under --data-dir, bind-mounted into the Pods that use it, and its size is only recorded (a
// directory has no size to change), which is what Kubernetes' resize flow needs to run end to
// end: the external-resizer calls ControllerExpandVolume and, as no node step is asked for,
// writes the new capacity to the PersistentVolume and the claim. The external-provisioner
// creates and deletes the volumes. The driver registers itself with the kubelet through the
// kubelet's plugin registration socket, as the node-driver-registrar sidecar would.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	name, nodeID, dataDir string
}

// A volume ID names a directory: the provisioner passes `pvc-<uid>` names.
var volumeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (d *driver) dir(id string) (string, error) {
	if !volumeID.MatchString(id) {
		return "", status.Errorf(codes.InvalidArgument, "invalid volume id %q", id)
	}
	return filepath.Join(d.dataDir, id), nil
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "0.1.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func controllerCap(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
	return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
		Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		controllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		controllerCap(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	}}, nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	dir, err := d.dir(req.GetName())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "create %s: %v", dir, err)
	}
	// MkdirAll honours the umask; Pods of any user write there.
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "chmod %s: %v", dir, err)
	}
	log.Printf("created volume %s (%d bytes)", req.GetName(), req.GetCapacityRange().GetRequiredBytes())
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      req.GetName(),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
	}}, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	dir, err := d.dir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, status.Errorf(codes.Internal, "delete %s: %v", dir, err)
	}
	log.Printf("deleted volume %s", req.GetVolumeId())
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

func (d *driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if _, err := d.dir(req.GetVolumeId()); err != nil {
		return nil, err
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	log.Printf("expanded volume %s to %d bytes", req.GetVolumeId(), size)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: false}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	dir, err := d.dir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "create %s: %v", target, err)
	}
	flags := uintptr(syscall.MS_BIND)
	if err := syscall.Mount(dir, target, "", flags, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", dir, target, err)
	}
	if req.GetReadonly() {
		flags |= syscall.MS_REMOUNT | syscall.MS_RDONLY
		if err := syscall.Mount("", target, "", flags, ""); err != nil {
			return nil, status.Errorf(codes.Internal, "read-only %s: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if mounted(target) {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	if err := os.RemoveAll(target); err != nil {
		return nil, status.Errorf(codes.Internal, "remove %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mounted: the mount table names `path` as a mount point (a bind mount from the same file
// system keeps the device, so comparing devices would not tell).
func mounted(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	want := []byte(" " + path + " ")
	for _, line := range splitLines(data) {
		if containsField(line, want) {
			return true
		}
	}
	return false
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return append(out, b[start:])
}

// containsField: mountinfo's fifth field (the mount point) is `want` (with its spaces).
func containsField(line, want []byte) bool {
	fields := 0
	for i := 0; i < len(line); i++ {
		if line[i] == ' ' {
			fields++
			if fields == 4 {
				rest := line[i:]
				return len(rest) >= len(want) && string(rest[:len(want)]) == string(want)
			}
		}
	}
	return false
}

// registrar answers the kubelet's plugin watcher: which driver this is and where its CSI
// socket is.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Printf("the kubelet refused the registration: %s", s.Error)
	} else {
		log.Printf("registered with the kubelet")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func listen(path string) net.Listener {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		log.Fatalf("create %s: %v", filepath.Dir(path), err)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listen on %s: %v", path, err)
	}
	return l
}

func main() {
	name := flag.String("driver-name", "hostpath.csi.kruise-rs", "the CSI driver's name")
	endpoint := flag.String("endpoint", "/run/kruise-rs-csi/csi.sock", "the CSI socket")
	nodeID := flag.String("node-id", "", "this node's name")
	dataDir := flag.String("data-dir", "", "where the volumes' directories go")
	registry := flag.String("registration-dir", "", "the kubelet's plugins_registry directory (no registration when empty)")
	flag.Parse()
	if *nodeID == "" || *dataDir == "" {
		log.Fatal("--node-id and --data-dir are required")
	}
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		log.Fatalf("create %s: %v", *dataDir, err)
	}
	d := &driver{name: *name, nodeID: *nodeID, dataDir: *dataDir}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(listen(*endpoint)) }()
	if *registry != "" {
		reg := grpc.NewServer()
		registerapi.RegisterRegistrationServer(reg, &registrar{name: *name, endpoint: *endpoint})
		sock := filepath.Join(*registry, fmt.Sprintf("%s-reg.sock", *name))
		go func() { errs <- reg.Serve(listen(sock)) }()
	}
	log.Printf("CSI driver %s serving on %s", *name, *endpoint)
	log.Fatal(<-errs)
}
