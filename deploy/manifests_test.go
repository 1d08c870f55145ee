// Package deploy holds how statefs is installed on Kubernetes: the Helm
// chart in helm/statefs, and in kubernetes/ the plain manifests rendered
// from it. It has no code, only tests, which keep both true:
//
//   - Every object, of the plain manifests and of the chart rendered for
//     each mode and a set of values, is decoded strictly into the API
//     server's own types (the Prometheus operator's for its objects, and
//     flinkDeployment's fields for the Flink operator's), so an unknown
//     field or a typo fails `make test` instead of `kubectl apply`.
//   - One set of checks (checkObjects) runs on each of them: the facts the
//     deployment depends on (the names, sockets, ports and paths that the
//     objects and containers must agree on, held deletes, privileges) and
//     what the values asked for (image, flags, node selection, the objects
//     each value turns on).
//   - The plain manifests are the chart's rendering with the values in
//     kubernetes/values/, byte for byte (TestPlainManifestsAreTheChart), so
//     the two cannot drift.
//
// The chart is rendered by Helm's own engine, the library `helm install`
// runs, at the version go.mod pins, so no helm binary is needed and what is
// checked is what users get.
package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	promopv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/statefs/statefs/csi"
)

// documentSeparator splits a multi-document YAML file.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// A decoded is one object of a manifest: where it came from (a file or a
// template), its kind, and its value, a pointer to its API type.
type decoded struct {
	source string
	kind   string
	value  any
}

// decodeManifest decodes the objects of a YAML manifest strictly: each
// document must be an object of a kind decodeDocument knows, with no field
// its type lacks and none twice.
func decodeManifest(source, text string) ([]decoded, error) {
	var objects []decoded
	for i, doc := range documentSeparator.Split(text, -1) {
		kind, obj, err := decodeDocument([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", source, i+1, err)
		}
		if obj != nil {
			objects = append(objects, decoded{source, kind, obj})
		}
	}
	return objects, nil
}

// flinkDeployment is the Flink Kubernetes operator's FlinkDeployment, with
// exactly the fields the chart's example uses, so that strict decoding
// refuses any other; its TaskManager pod template is the core API's.
type flinkDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Image              string              `json:"image"`
		FlinkVersion       string              `json:"flinkVersion"`
		ServiceAccount     string              `json:"serviceAccount"`
		FlinkConfiguration map[string]string   `json:"flinkConfiguration"`
		JobManager         flinkComponent      `json:"jobManager"`
		TaskManager        flinkComponent      `json:"taskManager"`
		Job                *flinkDeploymentJob `json:"job,omitempty"`
	} `json:"spec"`
}

type flinkComponent struct {
	Resource struct {
		CPU    float64 `json:"cpu"`
		Memory string  `json:"memory"`
	} `json:"resource"`
	PodTemplate *corev1.PodTemplateSpec `json:"podTemplate,omitempty"`
}

type flinkDeploymentJob struct {
	JarURI      string `json:"jarURI"`
	Parallelism int    `json:"parallelism"`
	UpgradeMode string `json:"upgradeMode"`
}

// decodeDocument decodes one YAML document strictly; nil for one that
// holds only comments.
func decodeDocument(doc []byte) (kind string, obj any, err error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return "", nil, err
	}
	switch meta.APIVersion + " " + meta.Kind {
	case " ":
		return "", nil, nil
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
	case "monitoring.coreos.com/v1 PodMonitor":
		obj = &promopv1.PodMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		obj = &promopv1.PrometheusRule{}
	case "flink.apache.org/v1beta1 FlinkDeployment":
		obj = &flinkDeployment{}
	default:
		return "", nil, &unknownKind{meta}
	}
	// As the API server decodes: field names match case-sensitively (Go's
	// encoding/json, and so yaml.UnmarshalStrict, would take clusterIp for
	// clusterIP), and unknown or repeated fields are errors.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return "", nil, err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return "", nil, err
	}
	return meta.Kind, obj, errors.Join(strict...)
}

type unknownKind struct{ metav1.TypeMeta }

func (e *unknownKind) Error() string {
	return "no API type known here for apiVersion " + e.APIVersion + " kind " + e.Kind
}

// The strict decoding the checks rely on refuses what it should.
func TestDecodingRefusesTypos(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterAddress: None\n",
		"field's case":    "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: None\n",
		"duplicate field": "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  name: y\n",
		"unknown kind":    "apiVersion: v1\nkind: Servise\n",
		"FlinkDeployment field the example does not use": "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata:\n  name: x\nspec:\n  mode: native\n",
		"FlinkDeployment pod template typo":              "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata:\n  name: x\nspec:\n  taskManager:\n    podTemplate:\n      spec:\n        initContainer: []\n",
		"PodMonitor typo":                                "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata:\n  name: x\nspec:\n  podMetricEndpoints: []\n",
		"PrometheusRule typo":                            "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: x\nspec:\n  groups:\n    - name: g\n      rules:\n        - alert: A\n          expression: up\n",
	} {
		if _, _, err := decodeDocument([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// chartValues are the chart's values the checks hold the objects to: what
// values.yaml and the overrides of a rendering give (from Helm's coalesced
// values, after its schema check).
type chartValues struct {
	Mode  string
	Image struct {
		Repository, Tag, PullPolicy string
	}
	LogFormat   string
	MetricsPort int
	HoldDeletes bool
	ReadCache   string
	MemoryLimit string
	Collector   struct {
		Interval, Grace string
		FlinkURLs       []string
		JobResultStore  string
		UnknownAfter    string
	}
	ExtraArgs         []string
	ExtraVolumeMounts []corev1.VolumeMount
	Node              struct {
		StorePath, MountPath, PriorityClassName, KubeletDir string
		NodeSelector                                        map[string]string
		Tolerations                                         []corev1.Toleration
		UpdateStrategy                                      appsv1.DaemonSetUpdateStrategy
	}
	Sidecar struct {
		StorePath, MountPath, WorkingDir string
		FlinkUser                        int
	}
	PodMonitor       struct{ Enabled bool }
	PrometheusRule   struct{ Enabled bool }
	GrafanaDashboard struct {
		Enabled bool
		Labels  map[string]string
	}
	Examples struct {
		CSIStatefulSet, SidecarStatefulSet, FlinkDeployment struct{ Enabled bool }
	}

	// image is the statefs image the values name (the tag defaults to the
	// chart's appVersion).
	image string
	// alertGroups and grafanaJSON are the chart's files the monitoring
	// objects embed.
	alertGroups []byte
	grafanaJSON []byte
}

// A report collects what the checks find wrong. A check that cannot go on
// after a failure returns.
type report struct{ failures []string }

func (r *report) errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// checkObjects runs every check on the objects of one installation (one
// rendering of the chart, or the plain manifests made from it), holding
// them to values v.
func checkObjects(objects []decoded, v *chartValues) []string {
	r := &report{}
	checkNamesAreDistinct(r, objects)
	count := map[string]int{}
	var daemonPods []*corev1.PodTemplateSpec
	var podMonitors []*promopv1.PodMonitor
	var daemonSet, pluginSet *appsv1.DaemonSet
	for _, o := range objects {
		count[o.kind]++
		switch obj := o.value.(type) {
		case *storagev1.CSIDriver:
			checkCSIDriver(r, obj)
		case *appsv1.DaemonSet:
			checkPodSpec(r, o.source, &obj.Spec.Template.Spec, nil)
			switch {
			case hasContainer(&obj.Spec.Template.Spec, "statefs"):
				count["daemon DaemonSet"]++
				daemonSet = obj
				daemonPods = append(daemonPods, &obj.Spec.Template)
			case hasContainer(&obj.Spec.Template.Spec, "csi-plugin"):
				count["plugin DaemonSet"]++
				pluginSet = obj
			default:
				r.errorf("%s: DaemonSet %s has neither the daemon nor the CSI plugin", o.source, obj.Name)
			}
		case *appsv1.StatefulSet:
			var claims []string
			for _, c := range obj.Spec.VolumeClaimTemplates {
				claims = append(claims, c.Name)
			}
			checkPodSpec(r, o.source, &obj.Spec.Template.Spec, claims)
			switch {
			case hasContainer(&obj.Spec.Template.Spec, "statefs"):
				count["sidecar StatefulSet"]++
				checkTaskManagerSidecar(r, &obj.Spec.Template, claims, "taskmanager", nil, v)
				daemonPods = append(daemonPods, &obj.Spec.Template)
			case csiVolume(&obj.Spec.Template.Spec) != nil:
				count["CSI StatefulSet"]++
				checkCSITaskManager(r, obj)
			default:
				r.errorf("%s: StatefulSet %s has neither the statefs sidecar nor a statefs volume", o.source, obj.Name)
			}
		case *flinkDeployment:
			tmpl := obj.Spec.TaskManager.PodTemplate
			if tmpl == nil {
				r.errorf("%s: FlinkDeployment %s has no TaskManager pod template", o.source, obj.Name)
				continue
			}
			checkPodSpec(r, o.source, &tmpl.Spec, nil)
			checkTaskManagerSidecar(r, tmpl, nil, "flink-main-container", obj.Spec.FlinkConfiguration, v)
			daemonPods = append(daemonPods, tmpl)
		case *promopv1.PodMonitor:
			podMonitors = append(podMonitors, obj)
		case *promopv1.PrometheusRule:
			checkPrometheusRule(r, obj, v)
		case *corev1.ConfigMap:
			checkGrafanaConfigMap(r, obj, v)
		}
	}
	if daemonSet != nil {
		checkNodeDaemonSet(r, daemonSet, v)
		if pluginSet != nil {
			checkPluginDaemonSet(r, pluginSet, daemonSet, v)
		}
	}
	for _, tmpl := range daemonPods {
		checkScraped(r, tmpl, v)
	}
	for _, pm := range podMonitors {
		checkPodMonitor(r, pm, daemonPods, v)
	}

	// The objects are the ones the values turn on, and no others.
	node, sidecar := v.Mode == "node", v.Mode == "sidecar"
	for what, want := range map[string]bool{
		"CSIDriver":           node,
		"daemon DaemonSet":    node,
		"plugin DaemonSet":    node,
		"CSI StatefulSet":     node && v.Examples.CSIStatefulSet.Enabled,
		"sidecar StatefulSet": sidecar && v.Examples.SidecarStatefulSet.Enabled,
		"FlinkDeployment":     sidecar && v.Examples.FlinkDeployment.Enabled,
		"PodMonitor":          v.PodMonitor.Enabled,
		"PrometheusRule":      v.PrometheusRule.Enabled,
		"ConfigMap":           v.GrafanaDashboard.Enabled,
	} {
		if n := count[what]; want && n != 1 || !want && n != 0 {
			r.errorf("%d objects %s, want %d (mode %s, and what the values turn on)", n, what, b2i(want), v.Mode)
		}
	}
	return r.failures
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkPodSpec checks what strict decoding cannot: that names refer to
// things that exist (a volume of the pod, or one of claims, a StatefulSet's
// volume claim templates) and enumerations hold one of their values.
func checkPodSpec(r *report, source string, spec *corev1.PodSpec, claims []string) {
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if volume(spec, m.Name) == nil && !slices.Contains(claims, m.Name) {
				r.errorf("%s: container %s mounts volume %s, which the pod does not have", source, c.Name, m.Name)
			}
			if p := m.MountPropagation; p != nil {
				if !slices.Contains([]corev1.MountPropagationMode{corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional}, *p) {
					r.errorf("%s: container %s: mountPropagation %q", source, c.Name, *p)
				}
				if *p == corev1.MountPropagationBidirectional && !privileged(&c) {
					r.errorf("%s: container %s: Bidirectional propagation needs a privileged container", source, c.Name)
				}
			}
		}
		for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			if probe == nil || probe.HTTPGet == nil {
				continue
			}
			if port := probe.HTTPGet.Port; containerPort(&c, port) == 0 {
				r.errorf("%s: container %s probes port %s, which it does not have", source, c.Name, port.String())
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

// container is the pod's container, or init container, called name, or nil.
func container(spec *corev1.PodSpec, name string) *corev1.Container {
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
	return nil
}

func hasContainer(spec *corev1.PodSpec, name string) bool { return container(spec, name) != nil }

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

// flagValues are the values of --name in args (as --name=value or
// --name value), in order.
func flagValues(args []string, name string) []string {
	var values []string
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			values = append(values, v)
		}
		if a == "--"+name && i+1 < len(args) {
			values = append(values, args[i+1])
		}
	}
	return values
}

// flagValue is the last value of --name in args, or "".
func flagValue(args []string, name string) string {
	if v := flagValues(args, name); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// hostPath is the host path of the pod's volume name, or "".
func hostPath(spec *corev1.PodSpec, name string) string {
	if v := volume(spec, name); v != nil && v.HostPath != nil {
		return v.HostPath.Path
	}
	return ""
}

// The objects of one installation can be applied together: no two objects
// of a kind share a namespace and name.
func checkNamesAreDistinct(r *report, objects []decoded) {
	seen := map[string]string{}
	for _, o := range objects {
		m, ok := o.value.(metav1.Object)
		if !ok {
			r.errorf("%s: %s has no object metadata", o.source, o.kind)
			continue
		}
		key := o.kind + " " + m.GetNamespace() + "/" + m.GetName()
		if other, dup := seen[key]; dup {
			r.errorf("%s is in both %s and %s: applying both replaces one with the other", key, other, o.source)
		}
		seen[key] = o.source
	}
}

// Prometheus's pod discovery finds each daemon's metrics: the pod template
// says to scrape the port the daemon serves them on, the values' port.
func checkScraped(r *report, tmpl *corev1.PodTemplateSpec, v *chartValues) {
	daemon := container(&tmpl.Spec, "statefs")
	port := strings.TrimPrefix(flagValue(mountArgs(daemon.Args), "metrics-addr"), ":")
	a := tmpl.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
		r.errorf("pod annotations %v: want prometheus.io/scrape true, port %s, path /metrics", a, port)
	}
	if port != strconv.Itoa(v.MetricsPort) {
		r.errorf("the daemon serves metrics on port %s, the values say %d", port, v.MetricsPort)
	}
}

// The PodMonitor scrapes the daemon pods of the mode in use (those of
// daemonPods, when the installation has them), on their metrics port.
func checkPodMonitor(r *report, pm *promopv1.PodMonitor, daemonPods []*corev1.PodTemplateSpec, v *chartValues) {
	selector, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil || selector.Empty() {
		r.errorf("PodMonitor %s: selector %v (%v): want the daemon pods' labels", pm.Name, pm.Spec.Selector, err)
		return
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		r.errorf("PodMonitor %s has %d endpoints, want one", pm.Name, len(pm.Spec.PodMetricsEndpoints))
		return
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port == nil || ep.Path != "/metrics" {
		r.errorf("PodMonitor %s scrapes port %v path %q, want the daemon's named port and /metrics", pm.Name, ep.Port, ep.Path)
		return
	}
	for _, tmpl := range daemonPods {
		if !selector.Matches(labels.Set(tmpl.Labels)) {
			r.errorf("PodMonitor %s selects %s, not the daemon pods labelled %v", pm.Name, selector, tmpl.Labels)
		}
		daemon := container(&tmpl.Spec, "statefs")
		if p := containerPort(daemon, intstr.FromString(*ep.Port)); int(p) != v.MetricsPort {
			r.errorf("PodMonitor %s scrapes port %s, which is %d in the daemon container; the values say %d", pm.Name, *ep.Port, p, v.MetricsPort)
		}
	}
	if (v.Mode == "node") != (pm.Name == "statefs-node") {
		r.errorf("PodMonitor %s in mode %s", pm.Name, v.Mode)
	}
}

// The PrometheusRule's groups are the chart's alert file's, as parsed: the
// file is their one source.
func checkPrometheusRule(r *report, pr *promopv1.PrometheusRule, v *chartValues) {
	var file promopv1.PrometheusRuleSpec
	j, err := yaml.YAMLToJSON(v.alertGroups)
	if err == nil {
		err = json.Unmarshal(j, &file)
	}
	if err != nil {
		r.errorf("the chart's alert file does not parse as a rule file: %v", err)
		return
	}
	if len(file.Groups) == 0 || !reflect.DeepEqual(pr.Spec.Groups, file.Groups) {
		r.errorf("PrometheusRule %s's groups are not the chart's alert file's", pr.Name)
	}
}

// The Grafana ConfigMap holds the chart's dashboard file as it is, with the
// labels Grafana's sidecar looks for.
func checkGrafanaConfigMap(r *report, cm *corev1.ConfigMap, v *chartValues) {
	if got := cm.Data["statefs-dashboard.json"]; got != string(v.grafanaJSON) {
		r.errorf("ConfigMap %s: statefs-dashboard.json is not the chart's dashboard file", cm.Name)
	} else if !json.Valid([]byte(got)) {
		r.errorf("ConfigMap %s: statefs-dashboard.json is not JSON", cm.Name)
	}
	if len(v.GrafanaDashboard.Labels) == 0 || !maps.Equal(cm.Labels, v.GrafanaDashboard.Labels) {
		r.errorf("ConfigMap %s labels %v, the values say %v (Grafana's sidecar finds dashboards by label)", cm.Name, cm.Labels, v.GrafanaDashboard.Labels)
	}
}

func checkCSIDriver(r *report, d *storagev1.CSIDriver) {
	if d.Name != csi.DriverName {
		r.errorf("CSIDriver %q, the plugin calls itself %q", d.Name, csi.DriverName)
	}
	if d.Spec.AttachRequired == nil || *d.Spec.AttachRequired {
		r.errorf("attachRequired must be false: nothing to attach")
	}
	if d.Spec.PodInfoOnMount == nil || !*d.Spec.PodInfoOnMount {
		r.errorf("podInfoOnMount must be true: inline volumes are named after their pod")
	}
	want := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}
	if !slices.Equal(d.Spec.VolumeLifecycleModes, want) {
		r.errorf("volumeLifecycleModes %v, want %v", d.Spec.VolumeLifecycleModes, want)
	}
}

// mountArgs are the arguments of statefs mount in a daemon's command line,
// or nil.
func mountArgs(args []string) []string {
	cmd := slices.Index(args, "mount")
	if cmd < 0 {
		return nil
	}
	return args[cmd+1:]
}

// checkDaemon checks that container daemon of spec runs the image the
// values name, statefs mount under its keeper of a store with metrics on
// the values' port, the port of its probes (the ones named, each a GET of
// /healthz), the collector's and
// caches' flags the values give, privileged, with /dev/fuse and a
// mountpoint whose mount reaches the host, and returns the store and the
// mountpoint (empty if the command line has none).
func checkDaemon(r *report, spec *corev1.PodSpec, daemon *corev1.Container, v *chartValues, probes ...string) (store, mnt string) {
	if daemon.Image != v.image {
		r.errorf("daemon image %s, the values say %s", daemon.Image, v.image)
	}
	if len(daemon.Command) != 0 {
		r.errorf("daemon container: command %q, want the image's entrypoint (statefs)", daemon.Command)
		return "", ""
	}
	args := mountArgs(daemon.Args)
	if len(args) == 0 {
		r.errorf("daemon runs statefs %q, want statefs ... mount ... MOUNTPOINT", daemon.Args)
		return "", ""
	}
	store, mnt, metrics := flagValue(args, "store"), args[len(args)-1], flagValue(args, "metrics-addr")
	if store == "" || metrics == "" || !path.IsAbs(mnt) {
		r.errorf("daemon runs statefs %q, want mount --store DIR --metrics-addr ADDR MOUNTPOINT", daemon.Args)
		return "", ""
	}
	if metrics != ":"+strconv.Itoa(v.MetricsPort) {
		r.errorf("daemon --metrics-addr %s, the values say port %d", metrics, v.MetricsPort)
	}
	if !privileged(daemon) {
		r.errorf("the daemon container must be privileged: it mounts")
	}
	if !slices.Contains(args, "--allow-other") {
		r.errorf("the daemon mounts as root for TaskManagers that are not: --allow-other")
	}
	if !slices.Contains(args, "--hold-deletes") {
		r.errorf("the daemon must hold deletes (--hold-deletes): Flink removes the local state a restarted TaskManager would use")
	}
	// The keeper mounts with mount(2) itself: the container is privileged.
	if k := flagValue(args, "keeper"); k != "" {
		if on, err := strconv.ParseBool(k); err != nil || !on {
			r.errorf("daemon --keeper=%s: the keeper is what keeps the mount across a crash of its server, and in node mode across an update", k)
		}
	}
	for flag, want := range map[string]string{
		"gc-interval":           v.Collector.Interval,
		"gc-grace":              v.Collector.Grace,
		"job-result-store":      v.Collector.JobResultStore,
		"collect-unknown-after": v.Collector.UnknownAfter,
		"read-cache":            v.ReadCache,
		"memory-limit":          v.MemoryLimit,
	} {
		if got := flagValue(args, flag); got != want {
			r.errorf("daemon --%s %q, the values say %q", flag, got, want)
		}
	}
	if got := flagValues(args, "flink-url"); !slices.Equal(got, v.Collector.FlinkURLs) {
		r.errorf("daemon --flink-url %q, the values say %q", got, v.Collector.FlinkURLs)
	}
	if flagValue(args, "gc-interval") != "" && flagValue(args, "flink-url") == "" && flagValue(args, "job-result-store") == "" {
		r.errorf("--gc-interval without --flink-url or --job-result-store: the collector would have no oracle")
	}
	if got := flagValue(daemon.Args[:len(daemon.Args)-len(args)], "log-format"); got != v.LogFormat {
		r.errorf("daemon --log-format %q, the values say %q", got, v.LogFormat)
	}
	checkResources(r, daemon)
	// No probe asks /readyz, whether the store takes new files. A probe
	// that restarts the daemon asks for liveness only: a restart cannot make
	// a read-only store writable, and costs every TaskManager on the mount
	// its open files. Readiness, which only the node DaemonSet's update
	// reads, asks the same: in a surge the controller deletes an old pod
	// that is not ready as soon as the new pod exists, before the new
	// daemon has taken the connection over, and the old keeper unmounts.
	all := map[string]*corev1.Probe{"startup": daemon.StartupProbe, "liveness": daemon.LivenessProbe, "readiness": daemon.ReadinessProbe}
	for _, name := range probes {
		probe := all[name]
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" {
			r.errorf("daemon %s probe: want GET /healthz", name)
			continue
		}
		if port := containerPort(daemon, probe.HTTPGet.Port); ":"+strconv.Itoa(int(port)) != metrics {
			r.errorf("daemon %s probe on port %d, metrics served on %s", name, port, metrics)
		}
	}
	for _, want := range v.ExtraVolumeMounts {
		if m := mountAt(daemon, want.MountPath); m == nil || !reflect.DeepEqual(*m, want) {
			r.errorf("daemon volume mount at %s is %+v, the values' extraVolumeMounts say %+v", want.MountPath, m, want)
		}
	}
	if jrs := flagValue(args, "job-result-store"); jrs != "" && !slices.ContainsFunc(daemon.VolumeMounts, func(m corev1.VolumeMount) bool {
		return jrs == m.MountPath || strings.HasPrefix(jrs, strings.TrimSuffix(m.MountPath, "/")+"/")
	}) {
		r.errorf("daemon --job-result-store %s is on no volume the daemon mounts: it would find no JobResultStore", jrs)
	}
	storeMount, mntMount, fuse := mountAt(daemon, store), mountAt(daemon, mnt), mountAt(daemon, "/dev/fuse")
	if storeMount == nil || mntMount == nil || fuse == nil {
		r.errorf("daemon container must mount the store at %s, the mountpoint at %s and /dev/fuse", store, mnt)
		return store, mnt
	}
	if mntMount.MountPropagation == nil || *mntMount.MountPropagation != corev1.MountPropagationBidirectional {
		r.errorf("the daemon's FUSE mount must reach the host: Bidirectional propagation on the mountpoint")
	}
	if hostPath(spec, fuse.Name) != "/dev/fuse" {
		r.errorf("/dev/fuse is not the host's /dev/fuse")
	}
	return store, mnt
}

// checkResources checks that container c requests CPU and memory and has a
// memory limit at least its request: the scheduler counts it, and a leak
// ends in its container, not in the node's.
func checkResources(r *report, c *corev1.Container) {
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
		r.errorf("container %s resources %+v: want CPU and memory requests and a memory limit at least the request", c.Name, c.Resources)
	}
}

// checkNodePlacement checks that a DaemonSet of node mode runs its pods
// on the nodes the values select, with no API access.
func checkNodePlacement(r *report, ds *appsv1.DaemonSet, v *chartValues) {
	spec := &ds.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		r.errorf("DaemonSet %s: the pods need no API access (no RBAC): automountServiceAccountToken must be false", ds.Name)
	}
	if !maps.Equal(spec.NodeSelector, v.Node.NodeSelector) {
		r.errorf("DaemonSet %s nodeSelector %v, the values say %v", ds.Name, spec.NodeSelector, v.Node.NodeSelector)
	}
	if len(spec.Tolerations)+len(v.Node.Tolerations) > 0 && !reflect.DeepEqual(spec.Tolerations, v.Node.Tolerations) {
		r.errorf("DaemonSet %s tolerations %v, the values say %v", ds.Name, spec.Tolerations, v.Node.Tolerations)
	}
	if spec.PriorityClassName != v.Node.PriorityClassName {
		r.errorf("DaemonSet %s priorityClassName %q, the values say %q", ds.Name, spec.PriorityClassName, v.Node.PriorityClassName)
	}
}

// surges reports whether a DaemonSet's update starts a node's new pod
// before it deletes the old one.
func surges(s appsv1.DaemonSetUpdateStrategy) bool {
	if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil || s.RollingUpdate.MaxSurge == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(s.RollingUpdate.MaxSurge, 100, true)
	return err != nil || n > 0
}

// isZero reports whether an intstr is 0 or 0%; nil is the API's default,
// which for maxUnavailable is 1.
func isZero(x *intstr.IntOrString) bool {
	return x != nil && (x.Type == intstr.Int && x.IntVal == 0 || x.Type == intstr.String && (x.StrVal == "0" || x.StrVal == "0%"))
}

// checkNodeDaemonSet checks the daemon's DaemonSet: the daemon on the
// node's store and mountpoint, and an update that keeps its connection
// (checkHandOver).
func checkNodeDaemonSet(r *report, ds *appsv1.DaemonSet, v *chartValues) {
	checkNodePlacement(r, ds, v)
	spec := &ds.Spec.Template.Spec
	want := v.Node.UpdateStrategy
	if want.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		want.RollingUpdate = nil // the chart renders a rollingUpdate only for RollingUpdate
	}
	if !reflect.DeepEqual(ds.Spec.UpdateStrategy, want) {
		r.errorf("DaemonSet updateStrategy %+v, the values say %+v", ds.Spec.UpdateStrategy, want)
	}
	daemon := container(spec, "statefs")
	store, mnt := checkDaemon(r, spec, daemon, v, "startup", "readiness")
	if store == "" {
		return
	}
	if store != v.Node.StorePath || hostPath(spec, mountAt(daemon, store).Name) != v.Node.StorePath {
		r.errorf("the daemon's store is %s, on the host %s; the values say %s", store, hostPath(spec, mountAt(daemon, store).Name), v.Node.StorePath)
	}
	if mnt != v.Node.MountPath || hostPath(spec, mountAt(daemon, mnt).Name) != v.Node.MountPath {
		r.errorf("the daemon mounts on %s, on the host %s; the values say %s", mnt, hostPath(spec, mountAt(daemon, mnt).Name), v.Node.MountPath)
	}
	if rules := flagValue(mountArgs(daemon.Args), "rules"); rules != "" {
		r.errorf("daemon runs with --rules %s: Flink's layout in CSI volumes is built in", rules)
	}
	checkHandOver(r, ds, daemon, mnt)
}

// mountServesCommand is the exec probe that the mount at mnt serves, asked
// through the mount (statefs.mountServes): a statfs with FUSE's magic.
func mountServesCommand(mnt string) []string {
	return []string{"sh", "-c", `test "$(stat -f -c %t "$0")" = 65735546`, mnt}
}

// checkHandOver checks what a node's update needs to keep the FUSE
// connection: the new daemon pod starts while the old one serves, and its
// daemon takes the connection over from the old one's keeper through the
// store (README, Upgrading on Kubernetes). So two daemon pods run on a node
// at once: nothing in them may take a host port or the host's network, and
// the pod holds the daemon alone (the CSI plugin's and the registrar's
// sockets have fixed names, and each removes its own as it stops). The old
// pod, once it has handed over, serves no probe of its own: its liveness is
// asked through the mount, or the kubelet would restart it and its new
// daemon would take the connection back. A surge deletes the old pod only
// once the new one is ready (maxUnavailable 0).
func checkHandOver(r *report, ds *appsv1.DaemonSet, daemon *corev1.Container, mnt string) {
	spec := &ds.Spec.Template.Spec
	if names := containerNames(spec); len(names) != 1 {
		r.errorf("the daemon's pod holds containers %q: two of its pods run on a node during an update, so it must hold the daemon alone", names)
	}
	if spec.HostNetwork {
		r.errorf("the daemon's pod uses the host's network: two of them run on a node during an update")
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				r.errorf("container %s takes host port %d: two daemon pods run on a node during an update", c.Name, p.HostPort)
			}
		}
	}
	if lp := daemon.LivenessProbe; lp == nil || lp.Exec == nil || !slices.Equal(lp.Exec.Command, mountServesCommand(mnt)) {
		r.errorf("daemon liveness probe %+v: want %q, asked through the mount: a pod that handed its connection over serves no /healthz", lp, mountServesCommand(mnt))
	}
	if s := ds.Spec.UpdateStrategy; surges(s) && !isZero(s.RollingUpdate.MaxUnavailable) {
		r.errorf("DaemonSet updateStrategy %+v: a surge with maxUnavailable above 0 may stop a daemon before its successor took the connection over", s)
	}
}

func containerNames(spec *corev1.PodSpec) []string {
	var names []string
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		names = append(names, c.Name)
	}
	return names
}

// checkPluginDaemonSet checks the CSI plugin's DaemonSet: the plugin sees
// the daemon's store and mount (of daemonSet) and binds into the kubelet's
// directory, the registrar registers its socket, and an update never runs
// two of its pods on a node.
func checkPluginDaemonSet(r *report, ds, daemonSet *appsv1.DaemonSet, v *chartValues) {
	checkNodePlacement(r, ds, v)
	if s := ds.Spec.UpdateStrategy; s.Type != appsv1.RollingUpdateDaemonSetStrategyType || surges(s) {
		r.errorf("plugin DaemonSet updateStrategy %+v: want RollingUpdate without surge: two plugins on a node remove each other's sockets", s)
	}
	dspec := &daemonSet.Spec.Template.Spec
	daemon := container(dspec, "statefs")
	args := mountArgs(daemon.Args)
	if len(args) == 0 {
		return
	}
	store, mnt := flagValue(args, "store"), args[len(args)-1]
	spec := &ds.Spec.Template.Spec
	plugin := container(spec, "csi-plugin")
	if plugin.Image != v.image {
		r.errorf("plugin image %s, the values say %s", plugin.Image, v.image)
	}
	if !privileged(plugin) {
		r.errorf("the plugin container must be privileged: it bind-mounts")
	}
	if !slices.Contains(plugin.Args, "csi") {
		r.errorf("plugin runs statefs %q, want statefs csi ...", plugin.Args)
		return
	}
	if got := flagValue(plugin.Args, "store"); got != store {
		r.errorf("plugin --store %s, daemon --store %s", got, store)
	}
	if got := flagValue(plugin.Args, "mount"); got != mnt {
		r.errorf("plugin --mount %s, daemon mounts %s", got, mnt)
	}
	health := strings.TrimPrefix(flagValue(plugin.Args, "health-addr"), ":")
	if lp := plugin.LivenessProbe; health == "" || lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" ||
		strconv.Itoa(int(containerPort(plugin, lp.HTTPGet.Port))) != health {
		r.errorf("the plugin needs a liveness probe: GET /healthz on the port of its --health-addr (%q)", health)
	}
	if flagValue(plugin.Args, "node-id") != "$(NODE_NAME)" {
		r.errorf("plugin --node-id %q, want $(NODE_NAME)", flagValue(plugin.Args, "node-id"))
	}
	for _, shared := range []string{store, mnt} {
		pm, dm := mountAt(plugin, shared), mountAt(daemon, shared)
		if pm == nil || dm == nil || hostPath(spec, pm.Name) != hostPath(dspec, dm.Name) {
			r.errorf("the plugin does not see the daemon's %s", shared)
		}
	}
	if pm := mountAt(plugin, mnt); pm == nil || pm.MountPropagation == nil || *pm.MountPropagation != corev1.MountPropagationBidirectional {
		r.errorf("the plugin must see the daemon's (new) mount: Bidirectional propagation on the mountpoint")
	}
	kubeletDir := v.Node.KubeletDir
	kubelet := mountAt(plugin, kubeletDir)
	if kubelet == nil || hostPath(spec, kubelet.Name) != kubeletDir {
		r.errorf("the plugin must mount the host's %s (the kubelet's directory) at %s", kubeletDir, kubeletDir)
		return
	}
	if kubelet.MountPropagation == nil || *kubelet.MountPropagation != corev1.MountPropagationBidirectional {
		r.errorf("the plugin's binds must reach the kubelet: Bidirectional propagation on %s", kubeletDir)
	}
	endpoint, ok := strings.CutPrefix(flagValue(plugin.Args, "endpoint"), "unix://")
	if !ok {
		r.errorf("plugin --endpoint %q, want unix:///PATH", flagValue(plugin.Args, "endpoint"))
		return
	}
	socketDir := mountAt(plugin, path.Dir(endpoint))
	if socketDir == nil {
		r.errorf("the plugin's socket %s is in no volume", endpoint)
		return
	}

	// The registrar: the plugin's socket, seen from the kubelet at its host path.
	registrar := container(spec, "node-driver-registrar")
	if registrar == nil {
		r.errorf("the plugin DaemonSet has no container node-driver-registrar")
		return
	}
	if !regexp.MustCompile(`^registry\.k8s\.io/sig-storage/csi-node-driver-registrar:v\d+\.\d+\.\d+$`).MatchString(registrar.Image) {
		r.errorf("registrar image %s: want a pinned release of registry.k8s.io/sig-storage/csi-node-driver-registrar", registrar.Image)
	}
	address := flagValue(registrar.Args, "csi-address")
	if m := mountAt(registrar, path.Dir(address)); m == nil || m.Name != socketDir.Name || path.Base(address) != path.Base(endpoint) {
		r.errorf("registrar --csi-address %s is not the plugin's socket %s in volume %s", address, endpoint, socketDir.Name)
	}
	pluginDir := hostPath(spec, socketDir.Name)
	if want := kubeletDir + "/plugins/" + csi.DriverName; pluginDir != want {
		r.errorf("the plugin's socket is in %s on the host, want %s", pluginDir, want)
	}
	if got, want := flagValue(registrar.Args, "kubelet-registration-path"), path.Join(pluginDir, path.Base(endpoint)); got != want {
		r.errorf("registrar --kubelet-registration-path %s, the plugin's socket is %s on the host", got, want)
	}
	if m := mountAt(registrar, "/registration"); m == nil || hostPath(spec, m.Name) != kubeletDir+"/plugins_registry" {
		r.errorf("the registrar must mount the kubelet's %s/plugins_registry at /registration", kubeletDir)
	}
	for _, c := range []*corev1.Container{plugin, registrar} {
		checkResources(r, c)
	}
}

// flinkProperties parses FLINK_PROPERTIES: one `key: value` a line, the
// value's quotes taken off (Flink 2 reads it as YAML).
func flinkProperties(c *corev1.Container) map[string]string {
	props := map[string]string{}
	for _, e := range c.Env {
		if e.Name != "FLINK_PROPERTIES" {
			continue
		}
		for _, line := range strings.Split(e.Value, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				props[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
	}
	return props
}

// csiVolume is the pod's inline statefs CSI volume, or nil.
func csiVolume(spec *corev1.PodSpec) *corev1.Volume {
	for i, v := range spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == csi.DriverName {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// checkResourceID checks that the TaskManager tm is its pod: Flink's
// resource id is the pod's name, from the downward API.
func checkResourceID(r *report, tm *corev1.Container) {
	if !slices.Contains(tm.Args, "-Dtaskmanager.resource-id=$(POD_NAME)") {
		r.errorf("taskmanager args %q: want -Dtaskmanager.resource-id=$(POD_NAME)", tm.Args)
	}
	podName := false
	for _, e := range tm.Env {
		podName = podName || e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}
	if !podName {
		r.errorf("POD_NAME must come from the downward API (metadata.name)")
	}
}

// The node mode's example: a TaskManager whose working directory is an
// inline statefs volume named after its pod, with local recovery on.
func checkCSITaskManager(r *report, sts *appsv1.StatefulSet) {
	spec := &sts.Spec.Template.Spec
	work := csiVolume(spec)
	if name := work.CSI.VolumeAttributes[csi.VolumeNameKey]; name != "" {
		r.errorf("the inline volume is named %q: without a name it is the pod's, which comes back with the pod", name)
	}
	tm := container(spec, "taskmanager")
	if tm == nil {
		r.errorf("StatefulSet %s has no container taskmanager", sts.Name)
		return
	}
	var mountPath string
	for _, m := range tm.VolumeMounts {
		if m.Name == work.Name {
			mountPath = m.MountPath
		}
	}
	props := flinkProperties(tm)
	if got := props["process.taskmanager.working-dir"]; got == "" || got != mountPath {
		r.errorf("process.taskmanager.working-dir %q, the statefs volume is mounted at %q", got, mountPath)
	}
	if props["state.backend.local-recovery"] != "true" {
		r.errorf("state.backend.local-recovery must be true")
	}
	if _, ok := props["taskmanager.state.local.root-dirs"]; ok {
		r.errorf("taskmanager.state.local.root-dirs must not be set: Flink deletes it on shutdown")
	}
	checkResourceID(r, tm)
}

// checkTaskManagerSidecar checks a TaskManager pod with statefs as a
// native sidecar: its store on the pod's own volume (one of claims, a
// StatefulSet's claim templates, or else a generic ephemeral volume), its
// mount shared with the TaskManager container tmName, which runs
// unprivileged with Flink 2's local-recovery keys (flinkConf, or else its
// FLINK_PROPERTIES).
func checkTaskManagerSidecar(r *report, tmpl *corev1.PodTemplateSpec, claims []string, tmName string, flinkConf map[string]string, v *chartValues) {
	spec := &tmpl.Spec
	sidecar := container(spec, "statefs")
	if sidecar == nil || !slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "statefs" }) ||
		sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		r.errorf("statefs must be a native sidecar: an init container with restartPolicy Always, so it starts first and stops last")
		return
	}
	store, mnt := checkDaemon(r, spec, sidecar, v, "startup", "liveness")
	if store == "" {
		return
	}
	if store != v.Sidecar.StorePath || mnt != v.Sidecar.MountPath {
		r.errorf("the sidecar's store %s and mountpoint %s, the values say %s and %s", store, mnt, v.Sidecar.StorePath, v.Sidecar.MountPath)
	}
	storeVolume := mountAt(sidecar, store)
	if storeVolume == nil {
		return
	}
	if claims != nil {
		if !slices.Contains(claims, storeVolume.Name) {
			r.errorf("the store %s is not on a volume claim template: it would not follow the pod", store)
		}
	} else if sv := volume(spec, storeVolume.Name); sv == nil || sv.Ephemeral == nil || sv.Ephemeral.VolumeClaimTemplate == nil {
		r.errorf("the store %s is not on a generic ephemeral volume: it would not outlive the TaskManager container", store)
	}
	shared := mountAt(sidecar, mnt).Name
	if sv := volume(spec, shared); sv == nil || sv.EmptyDir == nil {
		r.errorf("the mountpoint %s is not an emptyDir the containers share", mnt)
	}
	user := strconv.Itoa(v.Sidecar.FlinkUser)
	if sidecar.Lifecycle == nil || sidecar.Lifecycle.PostStart == nil || sidecar.Lifecycle.PostStart.Exec == nil ||
		!strings.Contains(strings.Join(sidecar.Lifecycle.PostStart.Exec.Command, " "), "chown "+user+":"+user+" "+mnt) {
		r.errorf("the sidecar's postStart must give the mount's root to Flink's user (%s) once it serves", user)
	}

	tm := container(spec, tmName)
	if tm == nil {
		r.errorf("the pod has no TaskManager container %s", tmName)
		return
	}
	if privileged(tm) {
		r.errorf("the TaskManager needs no privilege")
	}
	var work *corev1.VolumeMount
	for i, m := range tm.VolumeMounts {
		if m.Name == shared {
			work = &tm.VolumeMounts[i]
		}
	}
	if work == nil || work.MountPropagation == nil || *work.MountPropagation != corev1.MountPropagationHostToContainer {
		r.errorf("the TaskManager must mount the sidecar's mountpoint with HostToContainer propagation, to see its mount")
		return
	}
	props := flinkConf
	if props == nil {
		props = flinkProperties(tm)
		checkResourceID(r, tm)
	}
	if got := props["process.taskmanager.working-dir"]; got != work.MountPath || got != v.Sidecar.WorkingDir {
		r.errorf("process.taskmanager.working-dir %q, the mount is at %q, the values say %q", got, work.MountPath, v.Sidecar.WorkingDir)
	}
	for _, key := range []string{"execution.checkpointing.local-backup.enabled", "execution.state-recovery.from-local"} {
		if props[key] != "true" {
			r.errorf("%s must be true", key)
		}
	}
	for _, key := range []string{"execution.checkpointing.local-backup.dirs", "taskmanager.state.local.root-dirs"} {
		if _, ok := props[key]; ok {
			r.errorf("%s must not be set: Flink deletes it on shutdown", key)
		}
	}
}

// The image builds with the Go that go.mod asks for, through `make build`.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../Makefile")
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
