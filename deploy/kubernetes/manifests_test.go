// Package kubernetes holds statefs's Kubernetes manifests. Its test decodes
// every manifest strictly into the Kubernetes API types, so an unknown field
// or a typo fails `make test` instead of `kubectl apply`, and checks the
// facts the deployment depends on: the names, sockets and paths that the
// objects and containers must agree on.
package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/statefs/statefs/csi"
)

// documentSeparator splits a multi-document YAML file.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode reads the manifests in file strictly: each document must be an
// object of a kind listed here, with no field its API type lacks and none
// twice.
func decode(t *testing.T, file string) []any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var objects []any
	for i, doc := range documentSeparator.Split(string(b), -1) {
		obj, err := decodeDocument([]byte(doc))
		if err != nil {
			t.Fatalf("%s, document %d: %v", file, i+1, err)
		}
		if obj != nil {
			objects = append(objects, obj)
		}
	}
	return objects
}

// decodeDocument decodes one YAML document strictly; nil for one that
// holds only comments.
func decodeDocument(doc []byte) (any, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return nil, err
	}
	var obj any
	switch meta.APIVersion + " " + meta.Kind {
	case " ":
		return nil, nil
	case "storage.k8s.io/v1 CSIDriver":
		obj = &storagev1.CSIDriver{}
	case "apps/v1 DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	default:
		return nil, &unknownKind{meta}
	}
	// As the API server decodes: field names match case-sensitively (Go's
	// encoding/json, and so yaml.UnmarshalStrict, would take clusterIp for
	// clusterIP), and unknown or repeated fields are errors.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return nil, err
	}
	return obj, errors.Join(strict...)
}

type unknownKind struct{ metav1.TypeMeta }

func (e *unknownKind) Error() string {
	return "no API type known here for apiVersion " + e.APIVersion + " kind " + e.Kind
}

// manifests are the objects of every YAML file in this directory, by file.
func manifests(t *testing.T) map[string][]any {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests here (%v)", err)
	}
	all := map[string][]any{}
	for _, f := range files {
		all[f] = decode(t, f)
	}
	return all
}

// only is the one object of type T in file.
func only[T any](t *testing.T, file string) *T {
	t.Helper()
	var found []*T
	for _, obj := range decode(t, file) {
		if o, ok := obj.(*T); ok {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s holds %d objects of type %T, want 1", file, len(found), new(T))
	}
	return found[0]
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for file, objects := range manifests(t) {
		if len(objects) == 0 {
			t.Errorf("%s holds no objects", file)
		}
		for _, obj := range objects {
			var spec *corev1.PodSpec
			var claims []string
			switch o := obj.(type) {
			case *appsv1.DaemonSet:
				spec = &o.Spec.Template.Spec
			case *appsv1.StatefulSet:
				spec = &o.Spec.Template.Spec
				for _, c := range o.Spec.VolumeClaimTemplates {
					claims = append(claims, c.Name)
				}
			}
			if spec != nil {
				checkPodSpec(t, file, spec, claims)
			}
		}
	}
}

// The strict decoding the other tests rely on refuses what it should.
func TestDecodingRefusesTypos(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterAddress: None\n",
		"field's case":    "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: None\n",
		"duplicate field": "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  name: y\n",
		"unknown kind":    "apiVersion: v1\nkind: Servise\n",
	} {
		if _, err := decodeDocument([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// checkPodSpec checks what strict decoding cannot: that names refer to
// things that exist (a volume of the pod, or one of claims, a StatefulSet's
// volume claim templates) and enumerations hold one of their values.
func checkPodSpec(t *testing.T, file string, spec *corev1.PodSpec, claims []string) {
	t.Helper()
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if volume(spec, m.Name) == nil && !slices.Contains(claims, m.Name) {
				t.Errorf("%s: container %s mounts volume %s, which the pod does not have", file, c.Name, m.Name)
			}
			if p := m.MountPropagation; p != nil {
				if !slices.Contains([]corev1.MountPropagationMode{corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional}, *p) {
					t.Errorf("%s: container %s: mountPropagation %q", file, c.Name, *p)
				}
				if *p == corev1.MountPropagationBidirectional && !privileged(&c) {
					t.Errorf("%s: container %s: Bidirectional propagation needs a privileged container", file, c.Name)
				}
			}
		}
		for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			if probe == nil || probe.HTTPGet == nil {
				continue
			}
			if port := probe.HTTPGet.Port; containerPort(&c, port) == 0 {
				t.Errorf("%s: container %s probes port %s, which it does not have", file, c.Name, port.String())
			}
		}
	}
}

func volume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// container is the pod's container, or init container, called name.
func container(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// mountAt is c's volume mount at path, or nil.
func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func privileged(c *corev1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}

// containerPort is the number of c's port that port names or numbers, or 0.
func containerPort(c *corev1.Container, port intstr.IntOrString) int32 {
	for _, p := range c.Ports {
		if port.Type == intstr.String && p.Name == port.StrVal || port.Type == intstr.Int && p.ContainerPort == port.IntVal {
			return p.ContainerPort
		}
	}
	return 0
}

// flag is the value of --name in args (as --name=value or --name value).
func flag(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// hostPath is the host path of the pod's volume name.
func hostPath(t *testing.T, spec *corev1.PodSpec, name string) string {
	t.Helper()
	v := volume(spec, name)
	if v == nil || v.HostPath == nil {
		t.Fatalf("volume %s is not a hostPath", name)
	}
	return v.HostPath.Path
}

// The examples and the node's objects can be applied together: no two
// objects of a kind share a namespace and name.
func TestManifestNamesAreDistinct(t *testing.T) {
	seen := map[string]string{}
	for file, objects := range manifests(t) {
		for _, obj := range objects {
			o, ok := obj.(metav1.Object)
			if !ok {
				t.Fatalf("%s: %T has no object metadata", file, obj)
			}
			key := strings.TrimPrefix(strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1."), "*") + " " + o.GetNamespace() + "/" + o.GetName()
			if other, dup := seen[key]; dup {
				t.Errorf("%s is in both %s and %s: applying the directory replaces one with the other", key, other, file)
			}
			seen[key] = file
		}
	}
}

// Prometheus's pod discovery finds each daemon's metrics: the pod template
// says to scrape the port the daemon serves them on.
func TestDaemonsAreScraped(t *testing.T) {
	ds := only[appsv1.DaemonSet](t, "daemonset.yaml")
	ss := only[appsv1.StatefulSet](t, "flink-taskmanager-sidecar.yaml")
	for _, tmpl := range []*corev1.PodTemplateSpec{&ds.Spec.Template, &ss.Spec.Template} {
		daemon := container(t, &tmpl.Spec, "statefs")
		args := daemonCommand(t, daemon)
		port := strings.TrimPrefix(flag(args[slices.Index(args, "mount")+1:], "metrics-addr"), ":")
		a := tmpl.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("pod annotations %v: want prometheus.io/scrape true, port %s, path /metrics", a, port)
		}
	}
}

func TestCSIDriver(t *testing.T) {
	d := only[storagev1.CSIDriver](t, "csidriver.yaml")
	if d.Name != csi.DriverName {
		t.Errorf("CSIDriver %q, the plugin calls itself %q", d.Name, csi.DriverName)
	}
	if d.Spec.AttachRequired == nil || *d.Spec.AttachRequired {
		t.Error("attachRequired must be false: nothing to attach")
	}
	if d.Spec.PodInfoOnMount == nil || !*d.Spec.PodInfoOnMount {
		t.Error("podInfoOnMount must be true: inline volumes are named after their pod")
	}
	want := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}
	if !slices.Equal(d.Spec.VolumeLifecycleModes, want) {
		t.Errorf("volumeLifecycleModes %v, want %v", d.Spec.VolumeLifecycleModes, want)
	}
}

// checkDaemon checks that container daemon of spec runs statefs mount of a
// store with metrics on the port of its probes (the ones named, each a GET
// of /healthz), privileged, with /dev/fuse and a mountpoint whose mount
// reaches the host, and returns the mount command's arguments, the store
// and the mountpoint.
func checkDaemon(t *testing.T, spec *corev1.PodSpec, daemon *corev1.Container, probes ...string) (mountArgs []string, store, mnt string) {
	t.Helper()
	args := daemonCommand(t, daemon)
	cmd := slices.Index(args, "mount")
	if cmd < 0 || cmd+1 >= len(args) {
		t.Fatalf("daemon runs statefs %q, want statefs ... mount ... MOUNTPOINT", args)
	}
	mountArgs = args[cmd+1:]
	store, mnt, metrics := flag(mountArgs, "store"), mountArgs[len(mountArgs)-1], flag(mountArgs, "metrics-addr")
	if store == "" || metrics == "" || !path.IsAbs(mnt) {
		t.Fatalf("daemon runs statefs %q, want mount --store DIR --metrics-addr ADDR MOUNTPOINT", args)
	}
	if !privileged(daemon) {
		t.Error("the daemon container must be privileged: it mounts")
	}
	if !slices.Contains(mountArgs, "--hold-deletes") {
		t.Error("the daemon must hold deletes (--hold-deletes): Flink removes the local state a restarted TaskManager would use")
	}
	req, lim := daemon.Resources.Requests, daemon.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
		t.Errorf("daemon resources %+v: want CPU and memory requests and a memory limit at least the request", daemon.Resources)
	}
	all := map[string]*corev1.Probe{"startup": daemon.StartupProbe, "liveness": daemon.LivenessProbe, "readiness": daemon.ReadinessProbe}
	for _, name := range probes {
		probe := all[name]
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" {
			t.Errorf("daemon %s probe: want GET /healthz", name)
			continue
		}
		if port := containerPort(daemon, probe.HTTPGet.Port); ":"+strconv.Itoa(int(port)) != metrics {
			t.Errorf("daemon %s probe on port %d, metrics served on %s", name, port, metrics)
		}
	}
	storeMount, mntMount, fuse := mountAt(daemon, store), mountAt(daemon, mnt), mountAt(daemon, "/dev/fuse")
	if storeMount == nil || mntMount == nil || fuse == nil {
		t.Fatalf("daemon container must mount the store at %s, the mountpoint at %s and /dev/fuse", store, mnt)
	}
	if mntMount.MountPropagation == nil || *mntMount.MountPropagation != corev1.MountPropagationBidirectional {
		t.Error("the daemon's FUSE mount must reach the host: Bidirectional propagation on the mountpoint")
	}
	if hostPath(t, spec, fuse.Name) != "/dev/fuse" {
		t.Error("/dev/fuse is not the host's /dev/fuse")
	}
	return mountArgs, store, mnt
}

// daemonCommand is the statefs command line the daemon container runs.
func daemonCommand(t *testing.T, c *corev1.Container) []string {
	t.Helper()
	if len(c.Command) != 0 {
		t.Fatalf("daemon container: command %q, want the image's entrypoint (statefs)", c.Command)
	}
	return c.Args
}

func TestNodeDaemonSet(t *testing.T) {
	ds := only[appsv1.DaemonSet](t, "daemonset.yaml")
	spec := &ds.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pods need no API access (no RBAC): automountServiceAccountToken must be false")
	}

	daemon := container(t, spec, "statefs")
	mountArgs, store, mnt := checkDaemon(t, spec, daemon, "startup", "liveness", "readiness")
	if rules := flag(mountArgs, "rules"); rules != "" {
		t.Errorf("daemon runs with --rules %s: Flink's layout in CSI volumes is built in", rules)
	}

	// The plugin: the daemon's store and mount, binds that reach the kubelet.
	plugin := container(t, spec, "csi-plugin")
	if !privileged(plugin) {
		t.Error("the plugin container must be privileged: it bind-mounts")
	}
	if !slices.Contains(plugin.Args, "csi") {
		t.Fatalf("plugin runs statefs %q, want statefs csi ...", plugin.Args)
	}
	if got := flag(plugin.Args, "store"); got != store {
		t.Errorf("plugin --store %s, daemon --store %s", got, store)
	}
	if got := flag(plugin.Args, "mount"); got != mnt {
		t.Errorf("plugin --mount %s, daemon mounts %s", got, mnt)
	}
	if flag(plugin.Args, "node-id") != "$(NODE_NAME)" {
		t.Errorf("plugin --node-id %q, want $(NODE_NAME)", flag(plugin.Args, "node-id"))
	}
	for _, shared := range []string{store, mnt} {
		pm, dm := mountAt(plugin, shared), mountAt(daemon, shared)
		if pm == nil || hostPath(t, spec, pm.Name) != hostPath(t, spec, dm.Name) {
			t.Errorf("the plugin does not see the daemon's %s", shared)
		}
	}
	if pm := mountAt(plugin, mnt); pm.MountPropagation == nil || *pm.MountPropagation != corev1.MountPropagationBidirectional {
		t.Error("the plugin must see the daemon's (new) mount: Bidirectional propagation on the mountpoint")
	}
	kubelet := mountAt(plugin, "/var/lib/kubelet")
	if kubelet == nil || hostPath(t, spec, kubelet.Name) != "/var/lib/kubelet" {
		t.Fatal("the plugin must mount the host's /var/lib/kubelet at /var/lib/kubelet")
	}
	if kubelet.MountPropagation == nil || *kubelet.MountPropagation != corev1.MountPropagationBidirectional {
		t.Error("the plugin's binds must reach the kubelet: Bidirectional propagation on /var/lib/kubelet")
	}
	endpoint, ok := strings.CutPrefix(flag(plugin.Args, "endpoint"), "unix://")
	if !ok {
		t.Fatalf("plugin --endpoint %q, want unix:///PATH", flag(plugin.Args, "endpoint"))
	}
	socketDir := mountAt(plugin, path.Dir(endpoint))
	if socketDir == nil {
		t.Fatalf("the plugin's socket %s is in no volume", endpoint)
	}

	// The registrar: the plugin's socket, seen from the kubelet at its host path.
	registrar := container(t, spec, "node-driver-registrar")
	if !regexp.MustCompile(`^registry\.k8s\.io/sig-storage/csi-node-driver-registrar:v\d+\.\d+\.\d+$`).MatchString(registrar.Image) {
		t.Errorf("registrar image %s: want a pinned release of registry.k8s.io/sig-storage/csi-node-driver-registrar", registrar.Image)
	}
	address := flag(registrar.Args, "csi-address")
	if m := mountAt(registrar, path.Dir(address)); m == nil || m.Name != socketDir.Name || path.Base(address) != path.Base(endpoint) {
		t.Errorf("registrar --csi-address %s is not the plugin's socket %s in volume %s", address, endpoint, socketDir.Name)
	}
	pluginDir := hostPath(t, spec, socketDir.Name)
	if want := "/var/lib/kubelet/plugins/" + csi.DriverName; pluginDir != want {
		t.Errorf("the plugin's socket is in %s on the host, want %s", pluginDir, want)
	}
	if got, want := flag(registrar.Args, "kubelet-registration-path"), path.Join(pluginDir, path.Base(endpoint)); got != want {
		t.Errorf("registrar --kubelet-registration-path %s, the plugin's socket is %s on the host", got, want)
	}
	if m := mountAt(registrar, "/registration"); m == nil || hostPath(t, spec, m.Name) != "/var/lib/kubelet/plugins_registry" {
		t.Error("the registrar must mount the kubelet's plugins_registry at /registration")
	}
}

// flinkProperties parses FLINK_PROPERTIES: one `key: value` a line.
func flinkProperties(t *testing.T, c *corev1.Container) map[string]string {
	t.Helper()
	props := map[string]string{}
	for _, e := range c.Env {
		if e.Name != "FLINK_PROPERTIES" {
			continue
		}
		for _, line := range strings.Split(e.Value, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				props[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	if len(props) == 0 {
		t.Fatalf("container %s sets no FLINK_PROPERTIES", c.Name)
	}
	return props
}

func TestFlinkTaskManagerExample(t *testing.T) {
	sts := only[appsv1.StatefulSet](t, "flink-taskmanager-example.yaml")
	spec := &sts.Spec.Template.Spec
	var work *corev1.Volume
	for i, v := range spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == csi.DriverName {
			work = &spec.Volumes[i]
		}
	}
	if work == nil {
		t.Fatalf("the StatefulSet has no inline %s volume", csi.DriverName)
	}
	if name := work.CSI.VolumeAttributes[csi.VolumeNameKey]; name != "" {
		t.Errorf("the inline volume is named %q: without a name it is the pod's, which comes back with the pod", name)
	}
	tm := container(t, spec, "taskmanager")
	var mountPath string
	for _, m := range tm.VolumeMounts {
		if m.Name == work.Name {
			mountPath = m.MountPath
		}
	}
	props := flinkProperties(t, tm)
	if got := props["process.taskmanager.working-dir"]; got == "" || got != mountPath {
		t.Errorf("process.taskmanager.working-dir %q, the statefs volume is mounted at %q", got, mountPath)
	}
	if props["state.backend.local-recovery"] != "true" {
		t.Error("state.backend.local-recovery must be true")
	}
	if _, ok := props["taskmanager.state.local.root-dirs"]; ok {
		t.Error("taskmanager.state.local.root-dirs must not be set: Flink deletes it on shutdown")
	}
	if !slices.Contains(tm.Args, "-Dtaskmanager.resource-id=$(POD_NAME)") {
		t.Errorf("taskmanager args %q: want -Dtaskmanager.resource-id=$(POD_NAME)", tm.Args)
	}
	podName := false
	for _, e := range tm.Env {
		podName = podName || e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}
	if !podName {
		t.Error("POD_NAME must come from the downward API (metadata.name)")
	}
}

// The pod-level example: statefs as a native sidecar of each TaskManager,
// its store on the pod's own claim, its mount shared with the TaskManager,
// which runs unprivileged with Flink 2's local-recovery keys.
func TestFlinkTaskManagerSidecar(t *testing.T) {
	sts := only[appsv1.StatefulSet](t, "flink-taskmanager-sidecar.yaml")
	spec := &sts.Spec.Template.Spec
	sidecar := container(t, spec, "statefs")
	if !slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "statefs" }) ||
		sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatal("statefs must be a native sidecar: an init container with restartPolicy Always, so it starts first and stops last")
	}
	mountArgs, store, mnt := checkDaemon(t, spec, sidecar, "startup", "liveness")
	if !slices.Contains(mountArgs, "--allow-other") {
		t.Error("the daemon mounts as root for a TaskManager that is not: --allow-other")
	}
	if flag(mountArgs, "gc-interval") != "" && flag(mountArgs, "flink-url") == "" && flag(mountArgs, "job-result-store") == "" {
		t.Error("--gc-interval without --flink-url or --job-result-store: the collector would have no oracle")
	}
	claims := map[string]bool{}
	for _, c := range sts.Spec.VolumeClaimTemplates {
		claims[c.Name] = true
	}
	if !claims[mountAt(sidecar, store).Name] {
		t.Errorf("the store %s is not on a volume claim template: it would not follow the pod", store)
	}
	shared := mountAt(sidecar, mnt).Name
	if v := volume(spec, shared); v == nil || v.EmptyDir == nil {
		t.Errorf("the mountpoint %s is not an emptyDir the containers share", mnt)
	}
	if sidecar.Lifecycle == nil || sidecar.Lifecycle.PostStart == nil || sidecar.Lifecycle.PostStart.Exec == nil ||
		!strings.Contains(strings.Join(sidecar.Lifecycle.PostStart.Exec.Command, " "), "chown 9999:9999 "+mnt) {
		t.Error("the sidecar's postStart must give the mount's root to Flink's user (9999) once it serves")
	}

	tm := container(t, spec, "taskmanager")
	if privileged(tm) {
		t.Error("the TaskManager needs no privilege")
	}
	var work *corev1.VolumeMount
	for i, m := range tm.VolumeMounts {
		if m.Name == shared {
			work = &tm.VolumeMounts[i]
		}
	}
	if work == nil || work.MountPropagation == nil || *work.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Fatal("the TaskManager must mount the sidecar's mountpoint with HostToContainer propagation, to see its mount")
	}
	props := flinkProperties(t, tm)
	if got := props["process.taskmanager.working-dir"]; got != work.MountPath {
		t.Errorf("process.taskmanager.working-dir %q, the mount is at %q", got, work.MountPath)
	}
	for _, key := range []string{"execution.checkpointing.local-backup.enabled", "execution.state-recovery.from-local"} {
		if props[key] != "true" {
			t.Errorf("%s must be true", key)
		}
	}
	for _, key := range []string{"execution.checkpointing.local-backup.dirs", "taskmanager.state.local.root-dirs"} {
		if _, ok := props[key]; ok {
			t.Errorf("%s must not be set: Flink deletes it on shutdown", key)
		}
	}
	if !slices.Contains(tm.Args, "-Dtaskmanager.resource-id=$(POD_NAME)") {
		t.Errorf("taskmanager args %q: want -Dtaskmanager.resource-id=$(POD_NAME)", tm.Args)
	}
}

// The image builds with the Go that go.mod asks for, through `make build`.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	bin := regexp.MustCompile(`(?m)^BIN\s*:=\s*(\S+)`).FindSubmatch(makefile)
	if bin == nil {
		t.Fatal("the Makefile sets no BIN")
	}

	type stage struct {
		from, name string
		lines      []string
	}
	var stages []*stage
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); f[0] == "FROM" {
			s := &stage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %q before the first FROM", line)
		}
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
	}
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want a build and a runtime stage", len(stages))
	}
	build, runtime := stages[0], stages[1]
	if want := "golang:" + string(goVersion[1]) + "-"; !strings.HasPrefix(build.from, want) {
		t.Errorf("the build stage is FROM %s, go.mod wants Go %s (%s...)", build.from, goVersion[1], want)
	}
	if !slices.ContainsFunc(build.lines, func(l string) bool { return strings.HasPrefix(l, "RUN ") && strings.HasSuffix(l, "make build") }) {
		t.Error("the build stage does not RUN make build")
	}
	copyBinary := "COPY --from=" + build.name + " /src/" + string(bin[1]) + " /usr/local/bin/statefs"
	if build.name == "" || !slices.Contains(runtime.lines, copyBinary) {
		t.Errorf("the runtime stage does not %s", copyBinary)
	}
	if !slices.Contains(runtime.lines, `ENTRYPOINT ["statefs"]`) {
		t.Error(`the runtime stage's ENTRYPOINT is not ["statefs"]`)
	}
}
