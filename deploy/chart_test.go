package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = flag.Bool("update", false, "write the plain manifests in kubernetes/ from the chart")

const (
	chartDir = "helm/statefs"
	// plainDir holds the plain manifests, and plainValuesDir the values
	// each is rendered with (a directory of its own, so that
	// `kubectl apply -f deploy/kubernetes/` applies manifests only).
	plainDir       = "kubernetes"
	plainValuesDir = "kubernetes/values"
	regenerate     = "go test ./deploy/ -run TestPlainManifestsAreTheChart -update"
	// The release the chart is rendered as: README's `helm install statefs
	// deploy/helm/statefs --namespace kube-system`.
	releaseName      = "statefs"
	releaseNamespace = "kube-system"
)

// loadChart loads the chart from its directory, a copy of its own for
// each caller.
func loadChart(t testing.TB) *chartv2.Chart {
	t.Helper()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// A rendering is the chart's output for some values: each template's text
// by its path in the chart (templates/daemonset.yaml), and the values.
type rendering struct {
	templates map[string]string
	values    *chartValues
}

// clusterVersion is the Kubernetes the chart is rendered for: the oldest
// it supports in both modes (native sidecars).
const clusterVersion = "v1.29.0"

// render renders ch with overrides over its values.yaml, as `helm install`
// and `helm template` do: the values are checked against
// values.schema.json, then the templates are rendered by Helm's engine,
// for a cluster of clusterVersion.
func render(ch *chartv2.Chart, overrides common.Values) (*rendering, error) {
	return renderFor(ch, overrides, clusterVersion)
}

// renderFor renders as render does, for a cluster of Kubernetes version.
func renderFor(ch *chartv2.Chart, overrides common.Values, version string) (*rendering, error) {
	caps := common.DefaultCapabilities.Copy()
	kv, err := common.ParseKubeVersion(version)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	opts := common.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, IsInstall: true}
	top, err := util.ToRenderValues(ch, overrides, opts, caps)
	if err != nil {
		return nil, err
	}
	out, err := engine.Engine{}.RenderWithContext(context.Background(), ch, top)
	if err != nil {
		return nil, err
	}
	r := &rendering{templates: map[string]string{}, values: &chartValues{}}
	for name, text := range out {
		r.templates[strings.TrimPrefix(name, ch.Name()+"/")] = text
	}
	j, err := json.Marshal(top["Values"])
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(j, r.values); err != nil {
		return nil, fmt.Errorf("the chart's values: %w", err)
	}
	v := r.values
	v.image = v.Image.Repository + ":" + v.Image.Tag
	if v.Image.Tag == "" {
		v.image += ch.Metadata.AppVersion
	}
	for _, f := range ch.Files {
		switch f.Name {
		case "files/statefs-alerts.yaml":
			v.alertGroups = f.Data
		case "files/statefs-dashboard.json":
			v.grafanaJSON = f.Data
		}
	}
	return r, nil
}

// notes is the text helm install prints after installing (NOTES.txt).
const notes = "templates/NOTES.txt"

// objects decodes the rendering's manifests strictly: every template but
// the notes, which Helm prints rather than applies.
func (r *rendering) objects() ([]decoded, error) {
	var all []decoded
	for _, name := range slices.Sorted(maps.Keys(r.templates)) {
		if name == notes {
			continue
		}
		objs, err := decodeManifest(name, r.templates[name])
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	return all, nil
}

// readValues parses a values document as Helm reads a values file.
func readValues(t testing.TB, doc string) common.Values {
	t.Helper()
	v, err := common.ReadValues([]byte(doc))
	if err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v
}

// renderAndCheck renders ch with values and returns what checkObjects
// finds wrong with the objects.
func renderAndCheck(t testing.TB, ch *chartv2.Chart, values string) []string {
	t.Helper()
	r, err := render(ch, readValues(t, values))
	if err != nil {
		t.Fatalf("rendering with %q: %v", values, err)
	}
	objects, err := r.objects()
	if err != nil {
		t.Fatalf("rendering with %q: %v", values, err)
	}
	return checkObjects(objects, r.values)
}

// The chart, for each mode and a set of values that covers every value the
// templates turn into a flag, a field or an object, passes the checks.
func TestChart(t *testing.T) {
	ch := loadChart(t)
	for _, c := range []struct{ name, values string }{
		{"node, defaults", ``},
		{"node, collector on, two Flink URLs", `
collector:
  interval: 10m
  grace: 1h
  flinkURLs: [http://flink-jobmanager.flink:8081, https://other-rest.flink:8081/]`},
		{"node, collector on, a JobResultStore on an NFS volume", `
collector: {interval: 5m, jobResultStore: /mnt/flink-ha/job-result-store, unknownAfter: 168h}
extraVolumes: [{name: flink-ha, nfs: {server: nfs.example.com, path: /exports/flink-ha}}]
extraVolumeMounts: [{name: flink-ha, mountPath: /mnt/flink-ha/, readOnly: true}]
extraArgs: [--scrub-rate=64MiB]`},
		{"node, rolling updates without surge, another kubelet directory", `
node:
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 10%}}
  kubeletDir: /var/lib/k0s/kubelet`},
		{"node, updates on delete", `node: {updateStrategy: {type: OnDelete}}`},
		{"node, a surge of a percentage", `node: {updateStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 10%, maxUnavailable: "0%"}}}`},
		{"node, plugin and registrar resources", `
node:
  csiPlugin: {resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 256Mi}}}
  registrar: {image: registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.14.0, resources: {requests: {cpu: 5m, memory: 8Mi}, limits: {memory: 32Mi}}}`},
		{"node, custom metrics port, PodMonitor", `
metricsPort: 9900
podMonitor: {enabled: true, interval: 30s, labels: {release: prometheus}}`},
		{"node, custom image and tag", `
image: {repository: registry.example.com/flink/statefs, tag: v1.4.0-3-gdeadbee, pullPolicy: Always}`},
		{"node, nodeSelector and tolerations", `
node:
  nodeSelector: {statefs.io/disk: ssd, kubernetes.io/os: linux}
  tolerations:
    - {key: dedicated, operator: Equal, value: flink, effect: NoSchedule}
  priorityClassName: ""`},
		{"node, read cache, memory limit, text logs, paths", `
readCache: 256MiB
memoryLimit: 1GiB
logFormat: text
node: {storePath: /mnt/ssd/statefs/store, mountPath: /mnt/ssd/statefs/mnt}
resources: {requests: {cpu: "1", memory: 2Gi}, limits: {memory: 4Gi}}`},
		{"node, CSI example", `
examples: {csiStatefulSet: {enabled: true}}`},
		{"node, monitoring objects on", `
podMonitor: {enabled: true}
prometheusRule: {enabled: true, labels: {release: prometheus}}
grafanaDashboard: {enabled: true, annotations: {grafana_folder: Flink}}`},
		{"sidecar, defaults", `mode: sidecar`},
		{"sidecar, StatefulSet example, collector on", `
mode: sidecar
collector: {interval: 10m, flinkURLs: [http://flink-jobmanager:8081]}
examples: {sidecarStatefulSet: {enabled: true}}`},
		{"sidecar, StatefulSet example, a JobResultStore on a claim", `
mode: sidecar
collector: {interval: 10m, jobResultStore: /flink-ha/job-result-store}
extraVolumes: [{name: flink-ha, persistentVolumeClaim: {claimName: flink-ha, readOnly: true}}]
extraVolumeMounts: [{name: flink-ha, mountPath: /flink-ha, readOnly: true}]
examples: {sidecarStatefulSet: {enabled: true}}`},
		{"sidecar, FlinkDeployment example", `
mode: sidecar
collector: {interval: 10m, flinkURLs: [http://flink-statefs-rest.kube-system:8081]}
examples: {flinkDeployment: {enabled: true}}`},
		{"sidecar, FlinkDeployment session cluster, custom store", `
mode: sidecar
sidecar: {store: {size: 20Gi, storageClassName: premium-rwo}, workingDir: /flink/work, flinkUser: 1000}
examples:
  flinkDeployment:
    enabled: true
    name: sessions
    job: null
    flinkConfiguration: {taskmanager.numberOfTaskSlots: 4, state.backend.type: forst}`},
		{"sidecar, both examples, monitoring on, custom port and image", `
mode: sidecar
metricsPort: 19810
image: {repository: statefs, tag: "2026.1"}
collector: {interval: 1h, flinkURLs: [http://flink-jobmanager:8081, http://flink-statefs-rest:8081]}
examples: {sidecarStatefulSet: {enabled: true}, flinkDeployment: {enabled: true}}
podMonitor: {enabled: true, namespaces: [flink]}
prometheusRule: {enabled: true}
grafanaDashboard: {enabled: true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range renderAndCheck(t, ch, c.values) {
				t.Error(f)
			}
		})
	}
}

// Values the schema refuses fail rendering, naming the value, as they
// fail `helm install`.
func TestChartRefusesBadValues(t *testing.T) {
	ch := loadChart(t)
	for _, c := range []struct{ name, values, want string }{
		{"a mode that does not exist", `mode: daemonset`, "/mode"},
		{"a port that is not a number", `metricsPort: "9810x"`, "/metricsPort"},
		{"a port out of range", `metricsPort: 70000`, "/metricsPort"},
		{"a negative interval", `collector: {interval: -10m}`, "/collector/interval"},
		{"an interval without a unit", `collector: {interval: "10"}`, "/collector/interval"},
		{"a negative unknownAfter", `collector: {unknownAfter: -1h}`, "/collector/unknownAfter"},
		{"a Flink URL without a scheme", `collector: {flinkURLs: [flink-jobmanager:8081]}`, "/collector/flinkURLs/0"},
		{"a Flink URL that is not a list", `collector: {flinkURLs: http://flink-jobmanager:8081}`, "/collector/flinkURLs"},
		{"hold deletes as a string", `holdDeletes: "yes"`, "/holdDeletes"},
		{"a size the daemon cannot read", `readCache: lots`, "/readCache"},
		{"a size without a unit", `memoryLimit: "256"`, "/memoryLimit"},
		{"a log format the daemon does not know", `logFormat: yaml`, "/logFormat"},
		{"a misspelt value", `holdDelete: true`, "holdDelete"},
		{"a misspelt nested value", `node: {nodeSelectors: {disk: ssd}}`, "nodeSelectors"},
		{"a relative store path", `node: {storePath: var/lib/statefs/store}`, "/node/storePath"},
		{"a pull policy that does not exist", `image: {pullPolicy: Sometimes}`, "/image/pullPolicy"},
		{"a toleration's typo", `node: {tolerations: [{operator: Exist}]}`, "/node/tolerations/0/operator"},
		{"a JobResultStore on no volume", `collector: {interval: 10m, jobResultStore: /flink-ha/jrs}`, "collector.jobResultStore /flink-ha/jrs is on no volume the daemon mounts"},
		{"a JobResultStore beside its volume", "collector: {jobResultStore: /flink-ha2/jrs}\nextraVolumes: [{name: ha, emptyDir: {}}]\nextraVolumeMounts: [{name: ha, mountPath: /flink-ha}]", "collector.jobResultStore /flink-ha2/jrs is on no volume"},
		{"a volume mount without a path", `extraVolumeMounts: [{name: ha}]`, "/extraVolumeMounts/0"},
		{"an update strategy that does not exist", `node: {updateStrategy: {type: Recreate}}`, "/node/updateStrategy/type"},
		{"a surge that may stop a daemon first", `node: {updateStrategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 1}}}`, "set maxUnavailable to 0"},
		{"a surge with the API's default maxUnavailable", `node: {updateStrategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: null}}}`, "maxUnavailable 1"},
		{"the keeper off", `extraArgs: [--scrub-rate=64MiB, --keeper=false]`, "/extraArgs/1"},
		{"the keeper off, spelt otherwise", `extraArgs: [-keeper=0]`, "/extraArgs/0"},
		{"a relative kubelet directory", `node: {kubeletDir: var/lib/kubelet}`, "/node/kubeletDir"},
		{"the sidecar example in node mode", `examples: {sidecarStatefulSet: {enabled: true}}`, "examples.sidecarStatefulSet is an example of sidecar mode"},
		{"the FlinkDeployment example in node mode", `examples: {flinkDeployment: {enabled: true}}`, "examples.flinkDeployment is an example of sidecar mode"},
		{"the CSI example in sidecar mode", "mode: sidecar\nexamples: {csiStatefulSet: {enabled: true}}", "examples.csiStatefulSet is an example of node mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(ch, readValues(t, c.values))
			if err == nil {
				t.Fatalf("values %q rendered without an error", c.values)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("values %q: the error does not name %s:\n%v", c.values, c.want, err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// The checks catch a chart that breaks what the deployment depends on,
// through a value or a change to a template.
func TestChecksCatchBrokenCharts(t *testing.T) {
	for _, c := range []struct {
		name          string
		template, old string // a change to the chart: old becomes new in template
		new           string
		values        string
		want          string // in one of the failures
	}{
		{
			name:     "the node daemon lets only root use its mount",
			template: "templates/_helpers.tpl", old: `{{- $args = append $args "--allow-other" -}}`, new: "",
			want: "--allow-other",
		},
		{
			name:     "the sidecar lets only root use its mount",
			template: "templates/_helpers.tpl", old: `{{- $args = append $args "--allow-other" -}}`, new: "",
			values: "mode: sidecar\nexamples: {sidecarStatefulSet: {enabled: true}}",
			want:   "--allow-other",
		},
		{
			name:     "the node daemon is restarted when its store takes no new files",
			template: "templates/daemonset.yaml", old: `{{- include "statefs.mountServes" $n.mountPath | nindent 12 }}`, new: readyz(12),
			want: "daemon liveness probe",
		},
		{
			name:     "the sidecar is restarted when its store takes no new files",
			template: "templates/_helpers.tpl", old: "livenessProbe:\n    {{- include \"statefs.healthz\" . | nindent 4 }}", new: "livenessProbe:" + readyz(4),
			values: "mode: sidecar\nexamples: {sidecarStatefulSet: {enabled: true}}",
			want:   "daemon liveness probe: want GET /healthz",
		},
		{
			name:     "the node daemon's liveness asks its own pod's daemon",
			template: "templates/daemonset.yaml", old: `{{- include "statefs.mountServes" $n.mountPath | nindent 12 }}`, new: `{{- include "statefs.healthz" . | nindent 12 }}`,
			want: "daemon liveness probe",
		},
		{
			name:     "the node daemon's liveness asks through another path",
			template: "templates/daemonset.yaml", old: `{{- include "statefs.mountServes" $n.mountPath | nindent 12 }}`, new: `{{- include "statefs.mountServes" $n.storePath | nindent 12 }}`,
			want: "daemon liveness probe",
		},
		{
			name:     "the node daemon shares its pod with the plugin",
			template: "templates/daemonset.yaml", old: "      containers:\n", new: "      containers:\n        - {name: csi-plugin, image: statefs:dev, args: [csi]}\n",
			want: "must hold the daemon alone",
		},
		{
			name:     "the node daemon's pod uses the host's network",
			template: "templates/daemonset.yaml", old: "      automountServiceAccountToken: false\n", new: "      automountServiceAccountToken: false\n      hostNetwork: true\n",
			want: "uses the host's network",
		},
		{
			name:     "the node daemon takes a host port",
			template: "templates/_helpers.tpl", old: "  containerPort: {{ .Values.metricsPort }}", new: "  containerPort: {{ .Values.metricsPort }}\n  hostPort: {{ .Values.metricsPort }}",
			want: "takes host port 9810",
		},
		{
			name:     "the node daemon's surge may stop a daemon first",
			template: "templates/daemonset.yaml", old: `{{- fail (printf "node.updateStrategy: maxSurge`, new: `{{- $_ := (printf "node.updateStrategy: maxSurge`,
			values: "node: {updateStrategy: {rollingUpdate: {maxUnavailable: 1}}}",
			want:   "a surge with maxUnavailable above 0",
		},
		{
			name:     "the plugin surges",
			template: "templates/csi-plugin.yaml", old: "maxSurge: 0\n      maxUnavailable: 1", new: "maxSurge: 1\n      maxUnavailable: 0",
			want: "plugin DaemonSet updateStrategy",
		},
		{
			name:     "the plugin runs elsewhere than the daemon",
			template: "templates/csi-plugin.yaml", old: "{{- with $n.nodeSelector }}", new: "{{- with dict }}",
			values: "node: {nodeSelector: {disk: ssd}}",
			want:   "DaemonSet statefs-csi nodeSelector",
		},
		{
			name:     "the plugin sees another store than the daemon's",
			template: "templates/csi-plugin.yaml", old: "            path: {{ $n.storePath }}", new: "            path: /var/lib/other",
			want: "the plugin does not see the daemon's /var/lib/statefs/store",
		},
		{
			name:     "the node daemon runs without a keeper",
			template: "templates/_helpers.tpl", old: `{{- $args = append $args "--allow-other" -}}`, new: `{{- $args = concat $args (list "--allow-other" "--keeper=false") -}}`,
			want: "daemon --keeper=false",
		},
		{
			name:     "the sidecar runs without a keeper",
			template: "templates/_helpers.tpl", old: `{{- $args = append $args "--allow-other" -}}`, new: `{{- $args = concat $args (list "--allow-other" "--keeper=false") -}}`,
			values: "mode: sidecar\nexamples: {sidecarStatefulSet: {enabled: true}}",
			want:   "daemon --keeper=false",
		},
		{
			name:     "the node daemon's readiness asks whether its store takes new files",
			template: "templates/daemonset.yaml", old: "readinessProbe:\n            {{- include \"statefs.healthz\" . | nindent 12 }}", new: "readinessProbe:" + readyz(12),
			want: "daemon readiness probe: want GET /healthz",
		},
		{
			name:     "the DaemonSet's update strategy is fixed",
			template: "templates/daemonset.yaml", old: "type: {{ $n.updateStrategy.type }}", new: "type: RollingUpdate",
			values: "node: {updateStrategy: {type: OnDelete}}",
			want:   "DaemonSet updateStrategy",
		},
		{
			name:     "the registrar registers the socket in /var/lib/kubelet whatever the kubelet's directory",
			template: "templates/csi-plugin.yaml", old: "--kubelet-registration-path={{ $n.kubeletDir }}", new: "--kubelet-registration-path=/var/lib/kubelet",
			values: "node: {kubeletDir: /var/lib/k0s/kubelet}",
			want:   "registrar --kubelet-registration-path /var/lib/kubelet/plugins",
		},
		{
			name: "the plugin has no resources", values: "node: {csiPlugin: {resources: null}}",
			want: "container csi-plugin resources",
		},
		{
			name:     "the daemon does not mount the extra volumes",
			template: "templates/daemonset.yaml", old: "{{- with .Values.extraVolumeMounts }}", new: "{{- with list }}",
			values: "collector: {jobResultStore: /ha/jrs}\nextraVolumes: [{name: ha, emptyDir: {}}]\nextraVolumeMounts: [{name: ha, mountPath: /ha}]",
			want:   "daemon --job-result-store /ha/jrs is on no volume the daemon mounts",
		},
		{
			name:     "the plugin's probe asks another port",
			template: "templates/csi-plugin.yaml", old: "- --health-addr=:9808", new: "- --health-addr=:9818",
			want: "the plugin needs a liveness probe",
		},
		{name: "holdDeletes off", values: `holdDeletes: false`, want: "--hold-deletes"},
		{name: "holdDeletes off in the sidecar", values: "mode: sidecar\nholdDeletes: false\nexamples: {flinkDeployment: {enabled: true}}", want: "--hold-deletes"},
		{
			name:     "the probes' port is not the metrics port",
			template: "templates/_helpers.tpl", old: "containerPort: {{ .Values.metricsPort }}", new: "containerPort: {{ add .Values.metricsPort 1 }}",
			want: "probe on port 9811, metrics served on :9810",
		},
		{
			name:     "the scrape annotation's port is not the metrics port",
			template: "templates/_helpers.tpl", old: "prometheus.io/port: {{ .Values.metricsPort | quote }}", new: `prometheus.io/port: "8080"`,
			want: "prometheus.io/scrape true, port 9810",
		},
		{
			name:     "the Flink URLs are left out",
			template: "templates/_helpers.tpl", old: `{{- range $v.collector.flinkURLs }}`, new: `{{- range list }}`,
			values: "collector: {flinkURLs: [http://flink-jobmanager:8081]}",
			want:   "--flink-url",
		},
		{
			name:     "the DaemonSet ignores the node selector",
			template: "templates/daemonset.yaml", old: "{{- with $n.nodeSelector }}", new: "{{- with dict }}",
			values: "node: {nodeSelector: {disk: ssd}}",
			want:   "nodeSelector",
		},
		{
			name:     "the PodMonitor selects other pods",
			template: "templates/podmonitor.yaml", old: `{{- include "statefs.node.podLabels" . | nindent 6 }}`, new: "app: other",
			values: "podMonitor: {enabled: true}",
			want:   "not the daemon pods",
		},
		{
			name:     "the plugin binds from another mountpoint",
			template: "templates/csi-plugin.yaml", old: "- --mount={{ $n.mountPath }}", new: "- --mount=/mnt",
			want: "plugin --mount /mnt",
		},
		{
			name:     "the TaskManager does not see the sidecar's mount",
			template: "templates/_helpers.tpl", old: "mountPropagation: HostToContainer", new: "mountPropagation: None",
			values: "mode: sidecar\nexamples: {sidecarStatefulSet: {enabled: true}}",
			want:   "HostToContainer",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := loadChart(t)
			if c.template != "" {
				changed := false
				for _, f := range ch.Templates {
					if f.Name == c.template && bytes.Contains(f.Data, []byte(c.old)) {
						f.Data = bytes.ReplaceAll(f.Data, []byte(c.old), []byte(c.new))
						changed = true
					}
				}
				if !changed {
					t.Fatalf("%s holds no %q to change", c.template, c.old)
				}
			}
			failures := renderAndCheck(t, ch, c.values)
			i := slices.IndexFunc(failures, func(f string) bool { return strings.Contains(f, c.want) })
			if i < 0 {
				t.Fatalf("the checks found %q, want a failure about %q", failures, c.want)
			}
			t.Logf("found: %s", failures[i])
		})
	}
}

// readyz is a template's text for a probe of the daemon's /readyz, the
// store taking new files, at indent: what no probe of the chart asks.
func readyz(indent int) string {
	return fmt.Sprintf(`{{- include "statefs.healthz" . | replace "/healthz" "/readyz" | nindent %d }}`, indent)
}

// plainManifests renders the chart with each values file of plainValuesDir
// and gives each plain manifest's text (a template's non-empty output, with
// a header saying where it comes from) and the rendering it is from, by
// file name.
func plainManifests(t *testing.T) (texts map[string]string, from map[string]*rendering) {
	t.Helper()
	valueFiles, err := filepath.Glob(filepath.Join(plainValuesDir, "*.yaml"))
	if err != nil || len(valueFiles) == 0 {
		t.Fatalf("no values files in %s (%v)", plainValuesDir, err)
	}
	ch := loadChart(t)
	texts, from = map[string]string{}, map[string]*rendering{}
	for _, vf := range valueFiles {
		values, err := common.ReadValuesFile(vf)
		if err != nil {
			t.Fatal(err)
		}
		r, err := render(ch, values)
		if err != nil {
			t.Fatalf("%s: %v", vf, err)
		}
		for name, text := range r.templates {
			text = strings.TrimSpace(text)
			if text == "" || name == notes || !strings.HasPrefix(name, "templates/") || path.Dir(name) != "templates" {
				continue
			}
			file := path.Base(name)
			if _, dup := texts[file]; dup {
				t.Fatalf("%s is rendered from two values files", file)
			}
			texts[file] = fmt.Sprintf("# Generated from the Helm chart deploy/%s with deploy/%s by\n#   %s\n# Do not edit: change the chart or the values and run that.\n%s\n",
				chartDir, filepath.ToSlash(vf), regenerate, text)
			from[file] = r
		}
	}
	return texts, from
}

// The plain manifests are the chart rendered with the values of
// plainValuesDir, so the two cannot drift; -update writes them.
func TestPlainManifestsAreTheChart(t *testing.T) {
	texts, _ := plainManifests(t)
	existing, err := filepath.Glob(filepath.Join(plainDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range existing {
		if _, ok := texts[filepath.Base(f)]; ok {
			continue
		}
		if *update {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is no rendering of the chart: remove it, or run %s", f, regenerate)
	}
	for _, file := range slices.Sorted(maps.Keys(texts)) {
		p := filepath.Join(plainDir, file)
		if *update {
			if err := os.WriteFile(p, []byte(texts[file]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != texts[file] {
			t.Errorf("%s is not the chart's rendering (%v): run %s", p, err, regenerate)
		}
	}
}

// The plain manifests, as committed, pass the checks, each set with the
// values it was rendered with, and all of them apply together.
func TestPlainManifests(t *testing.T) {
	texts, from := plainManifests(t)
	byRendering := map[*rendering][]decoded{}
	var all []decoded
	for _, file := range slices.Sorted(maps.Keys(texts)) {
		b, err := os.ReadFile(filepath.Join(plainDir, file))
		if err != nil {
			t.Fatalf("%v: run %s", err, regenerate)
		}
		objects, err := decodeManifest(file, string(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(objects) == 0 {
			t.Errorf("%s holds no objects", file)
		}
		byRendering[from[file]] = append(byRendering[from[file]], objects...)
		all = append(all, objects...)
	}
	for r, objects := range byRendering {
		for _, f := range checkObjects(objects, r.values) {
			t.Errorf("%s mode: %s", r.values.Mode, f)
		}
	}
	r := &report{}
	checkNamesAreDistinct(r, all)
	for _, f := range r.failures {
		t.Error(f)
	}
}

// A chart that depends on this one gives its own TaskManagers the sidecar
// by including the named templates with the context .Subcharts.statefs, as
// _helpers.tpl says, and gets statefs's values and image in them.
func TestSidecarTemplatesInAnotherChart(t *testing.T) {
	const taskManagers = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}-taskmanager
spec:
  serviceName: {{ .Release.Name }}-taskmanager
  selector:
    matchLabels: {app: flink}
  template:
    metadata:
      labels:
        app: flink
        {{- include "statefs.sidecar.podLabels" .Subcharts.statefs | nindent 8 }}
      annotations:
        {{- include "statefs.sidecar.podAnnotations" .Subcharts.statefs | nindent 8 }}
    spec:
      initContainers:
        {{- include "statefs.sidecar.initContainer" .Subcharts.statefs | nindent 8 }}
      containers:
        - name: taskmanager
          image: flink:2.1-java17
          args: ["taskmanager", "-Dtaskmanager.resource-id=$(POD_NAME)"]
          env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: FLINK_PROPERTIES
              value: |
                {{- include "statefs.sidecar.flinkConfiguration" .Subcharts.statefs | nindent 16 }}
          volumeMounts:
            {{- include "statefs.sidecar.taskManagerMount" .Subcharts.statefs | nindent 12 }}
      volumes:
        {{- include "statefs.sidecar.volumes" .Subcharts.statefs | nindent 8 }}
  volumeClaimTemplates:
    {{- include "statefs.sidecar.storeClaimTemplate" .Subcharts.statefs | nindent 4 }}
`
	statefs := loadChart(t)
	parent := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "flink", Version: "1.0.0", AppVersion: "2.1"},
		Templates: []*common.File{{Name: "templates/taskmanagers.yaml", Data: []byte(taskManagers)}},
		Values:    map[string]any{},
	}
	parent.AddDependency(statefs)
	values := readValues(t, `
global: {region: eu}
statefs:
  mode: sidecar
  metricsPort: 9900
  collector: {interval: 10m, flinkURLs: [http://flink-jobmanager:8081]}
`)
	opts := common.ReleaseOptions{Name: "flink", Namespace: "flink", IsInstall: true}
	top, err := util.ToRenderValues(parent, values, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Engine{}.RenderWithContext(context.Background(), parent, top)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := decodeManifest("taskmanagers.yaml", out["flink/templates/taskmanagers.yaml"])
	if err != nil || len(objects) != 1 {
		t.Fatalf("the parent's StatefulSet: %d objects, %v", len(objects), err)
	}
	sts := objects[0].value.(*appsv1.StatefulSet)

	// The checks, with statefs's values as the parent set them.
	statefsValues, err := top.Table("Values.statefs")
	if err != nil {
		t.Fatal(err)
	}
	v := &chartValues{}
	j, err := json.Marshal(statefsValues)
	if err == nil {
		err = json.Unmarshal(j, v)
	}
	if err != nil {
		t.Fatal(err)
	}
	v.image = v.Image.Repository + ":" + statefs.Metadata.AppVersion
	r := &report{}
	checkPodSpec(r, "taskmanagers.yaml", &sts.Spec.Template.Spec, []string{sts.Spec.VolumeClaimTemplates[0].Name})
	checkTaskManagerSidecar(r, &sts.Spec.Template, []string{sts.Spec.VolumeClaimTemplates[0].Name}, "taskmanager", nil, v)
	checkScraped(r, &sts.Spec.Template, v)
	for _, f := range r.failures {
		t.Error(f)
	}
	if got := container(&sts.Spec.Template.Spec, "statefs").Image; got != "statefs:"+statefs.Metadata.AppVersion {
		t.Errorf("the sidecar's image %s: want statefs's appVersion as its tag, not the parent's", got)
	}
}

// By default an update of node mode keeps each node's FUSE connection: the
// daemon's DaemonSet starts a node's new pod beside the old one (maxSurge
// 1) and deletes the old one only once the new one is ready (maxUnavailable
// 0), so the new daemon takes the connection over (checkHandOver holds the
// pod to what that needs). A cluster whose DaemonSets cannot surge is
// refused that, and may update OnDelete.
func TestChartHandsOverByDefault(t *testing.T) {
	ch := loadChart(t)
	r, err := render(ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := decodeManifest("daemonset.yaml", r.templates["templates/daemonset.yaml"])
	if err != nil || len(objects) != 1 {
		t.Fatalf("the daemon's DaemonSet: %d objects, %v", len(objects), err)
	}
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	want := appsv1.DaemonSetUpdateStrategy{
		Type:          appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: &one, MaxUnavailable: &zero},
	}
	if got := objects[0].value.(*appsv1.DaemonSet).Spec.UpdateStrategy; !reflect.DeepEqual(got, want) {
		t.Errorf("the daemon's DaemonSet updates with %+v, want a surge of one pod with none unavailable", got)
	}

	const old = "v1.24.9"
	if _, err := renderFor(ch, nil, old); err == nil || !strings.Contains(err.Error(), "needs Kubernetes 1.25 or later, this cluster is "+old) {
		t.Errorf("the defaults on Kubernetes %s: %v, want a refusal that names the version", old, err)
	}
	if _, err := renderFor(ch, readValues(t, "node: {updateStrategy: {type: OnDelete}}"), old); err != nil {
		t.Errorf("OnDelete on Kubernetes %s: %v", old, err)
	}
}

// The kubelet's directory is a value, and every path under it in the
// plugin's DaemonSet follows it: none is left at the usual /var/lib/kubelet.
func TestChartKubeletDir(t *testing.T) {
	r, err := render(loadChart(t), readValues(t, `node: {kubeletDir: /var/lib/k0s/kubelet}`))
	if err != nil {
		t.Fatal(err)
	}
	ds := r.templates["templates/csi-plugin.yaml"]
	if strings.Contains(ds, "/var/lib/kubelet") {
		t.Errorf("the plugin's DaemonSet names /var/lib/kubelet with node.kubeletDir /var/lib/k0s/kubelet:\n%s", ds)
	}
	for _, want := range []string{
		"mountPath: /var/lib/k0s/kubelet\n",
		"--kubelet-registration-path=/var/lib/k0s/kubelet/plugins/statefs.csi.statefs.io/csi.sock",
		"path: /var/lib/k0s/kubelet/plugins/statefs.csi.statefs.io\n",
		"path: /var/lib/k0s/kubelet/plugins_registry\n",
		"path: /var/lib/k0s/kubelet\n",
	} {
		if !strings.Contains(ds, want) {
			t.Errorf("the plugin's DaemonSet has no %q", want)
		}
	}
}

// What helm install prints says how to watch the install, and warns when
// the collector is off, since the disk then fills with finished jobs.
func TestChartNotes(t *testing.T) {
	ch := loadChart(t)
	for _, c := range []struct {
		values string
		want   []string
		not    []string
	}{
		{"mode: node", []string{"rollout status daemonset/statefs-csi", "rollout status daemonset/statefs-node", "hands its FUSE connection\nover",
			"WARNING: the collector is off", "WARNING: the image statefs:" + ch.Metadata.AppVersion + " is published nowhere", "push it to a registry", "set image.repository"},
			[]string{"--watch", "costs"}},
		{"mode: node\ncollector: {interval: 10m, flinkURLs: [http://jm:8081]}", []string{"rollout status daemonset/statefs-node"}, []string{"WARNING: the collector is off"}},
		// kubectl rollout status refuses a DaemonSet that updates OnDelete.
		{"node: {updateStrategy: {type: OnDelete}}", []string{"get daemonset/statefs-node --watch", "only when its pod is deleted", "costs the node's TaskManagers"},
			[]string{"rollout status daemonset/statefs-node", "hands"}},
		{"node: {updateStrategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}}", []string{"rollout status daemonset/statefs-node", "restarts the daemons one node after another"},
			[]string{"--watch", "hands"}},
		{"mode: sidecar", []string{"statefs.sidecar.", "WARNING: the collector is off", "WARNING: the image statefs:"}, []string{"statefs-node"}},
		{"image: {repository: registry.example.com/statefs, tag: v1.2.0}", nil, []string{"WARNING: the image"}},
	} {
		r, err := render(ch, readValues(t, c.values))
		if err != nil {
			t.Fatalf("%q: %v", c.values, err)
		}
		text, ok := r.templates[notes]
		if !ok {
			t.Fatalf("%q: the chart has no %s", c.values, notes)
		}
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%q: the notes do not say %q:\n%s", c.values, w, text)
			}
		}
		for _, w := range c.not {
			if strings.Contains(text, w) {
				t.Errorf("%q: the notes say %q:\n%s", c.values, w, text)
			}
		}
	}
}
