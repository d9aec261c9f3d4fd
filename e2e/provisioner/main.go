// Command hostpath-provisioner dynamically provisions hostPath PersistentVolumes for the local cluster.
//
// Every node of the local cluster is this one machine, so a directory under the cluster's state dir is
// visible to every pod: ReadWriteOnce and ReadWriteMany both hold. The provisioning protocol (watching
// claims, creating and binding PVs, honouring the reclaim policy) is sig-storage-lib-external-provisioner's;
// this file only creates and removes directories. The library's own example (examples/hostpath-provisioner)
// is a separate module that is not published, so it cannot be built from the module proxy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

type hostPath struct {
	root string // every volume is a directory root/<pv-name>
}

// Provision creates the claim's directory and a PV pointing at it.
func (p *hostPath) Provision(_ context.Context, options controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if options.PVC.Spec.VolumeMode != nil && *options.PVC.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, fmt.Errorf("block volumes are not supported")
	}
	dir := filepath.Join(p.root, options.PVName)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// Writable by any pod user: the kubelet applies no fsGroup to hostPath volumes, and the umask
	// took group and other write away (pods of the real node run as non-root users).
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	directory := v1.HostPathDirectory
	reclaim := v1.PersistentVolumeReclaimDelete
	if options.StorageClass.ReclaimPolicy != nil {
		reclaim = *options.StorageClass.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: options.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   options.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: options.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			StorageClassName:              options.StorageClass.Name,
			MountOptions:                  options.StorageClass.MountOptions,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &directory},
			},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory; PVs outside our root are not ours to touch.
func (p *hostPath) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	source := pv.Spec.HostPath
	if source == nil || filepath.Dir(filepath.Clean(source.Path)) != filepath.Clean(p.root) {
		return &controller.IgnoredError{Reason: "the volume is not a directory under " + p.root}
	}
	return os.RemoveAll(source.Path)
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the provisioner's identity")
	root := flag.String("root", "", "directory that holds one subdirectory per volume")
	name := flag.String("provisioner-name", "streamapp.dev/hostpath", "the StorageClass provisioner it serves")
	metricsPort := flag.Int("metrics-port", 0, "serve /metrics on 127.0.0.1 (0: off); also a readiness signal")
	flag.Parse()
	if *kubeconfig == "" || *root == "" || strings.TrimSpace(*name) == "" {
		klog.Exit("--kubeconfig, --root and --provisioner-name are required")
	}
	syscall.Umask(0) // volumes are shared by whatever user a pod runs as
	if err := os.MkdirAll(*root, 0o777); err != nil {
		klog.Exit(err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Exit(err)
	}
	client := kubernetes.NewForConfigOrDie(config)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	provisioner := &hostPath{root: filepath.Clean(*root)}
	controller.NewProvisionController(ctx, client, *name, provisioner,
		controller.LeaderElection(false), // one instance per cluster
		controller.MetricsAddress("127.0.0.1"),
		controller.MetricsPort(int32(*metricsPort)),
	).Run(ctx)
}
