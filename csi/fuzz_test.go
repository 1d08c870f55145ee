package csi

// Fuzz targets for the CSI plugin's decoders of external data: volume
// names, publish requests (the CO's fields), and the publication records
// the plugin reads back from its state directory. Their seed corpora are
// in testdata/fuzz/<target>/; `go test` runs them, and e.g.
// `go test -run XXX -fuzz FuzzNodePublishRequest ./csi/` searches for more.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nameRule is the volume-name rule, written out independently of
// checkVolumeName: 1 to 253 characters of [A-Za-z0-9._-], not starting
// with '.', without "..".
func nameRule(name string) bool {
	if len(name) < 1 || len(name) > 253 || name[0] == '.' || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkOneComponent fails unless name, joined under base/volumes, is one
// component directly below base/volumes.
func checkOneComponent(t *testing.T, name string) {
	t.Helper()
	base := "/var/lib/statefs/mnt"
	dir := filepath.Join(base, volumesDir)
	p := filepath.Join(dir, name)
	if filepath.Dir(p) != dir || filepath.Base(p) != name || !strings.HasPrefix(p, dir+"/") {
		t.Fatalf("volume name %q joins to %q, not one component below %s", name, p, dir)
	}
	if rel, err := filepath.Rel(base, p); err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("volume name %q escapes %s: %q", name, base, p)
	}
}

func FuzzVolumeName(f *testing.F) {
	for _, s := range []string{
		"flink-taskmanager-0", "pv-2", "tm_A.b-9", "a", "A.b", "a.", "a-", "-", "_",
		strings.Repeat("a", 253), strings.Repeat("a", 254),
		"", ".", "..", "...", ".a", "a..b", "a/b", "/a", "a/", "../../etc", "a/../b",
		"tm 1", "tm\x001", "tm-ä", "\xff", "a\u202eb", "a\\b", "a\nb", "ａ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := checkVolumeName(name)
		if want := nameRule(name); (err == nil) != want {
			t.Fatalf("checkVolumeName(%q) = %v; the rule says accepted = %v", name, err, want)
		}
		if err == nil {
			checkOneComponent(t, name)
		}
	})
}

// fuzzPlugin is a plugin whose mount is a plain directory: the daemon does
// not serve it, so NodePublishVolume must refuse every request, with
// InvalidArgument for a bad one and Unavailable for a good one, and touch
// nothing.
func fuzzPlugin(f *testing.F) *Plugin {
	dir := f.TempDir()
	p := &Plugin{NodeID: "node-1", Mount: filepath.Join(dir, "mnt"), StateDir: filepath.Join(dir, "store", "csi")}
	if err := os.Mkdir(p.Mount, 0o755); err != nil {
		f.Fatal(err)
	}
	return p
}

// Bits of FuzzNodePublishRequest's set argument.
const (
	setVolumeName = 1 << iota
	setPodName
	setEphemeral
	setCapability
	setAccessMode
)

func FuzzNodePublishRequest(f *testing.F) {
	all := uint8(setVolumeName | setCapability | setAccessMode)
	// volumeID, target, volumeName, podName, ephemeral, set, accessType
	// (0 none, 1 mount, 2 block), accessMode, readonly, mount flags (comma
	// separated), fsType, volume_mount_group.
	f.Add("vol-1", "/var/lib/kubelet/pods/p/volumes/v/mount", "flink-taskmanager-0", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("pv-2", "/t", "", "", "", uint8(setCapability|setAccessMode), uint8(1), int32(5), true, "ro,rw", "ext4", "1000")
	f.Add("csi-5f3a9", "/t/x/", "", "flink-taskmanager-3", "true", uint8(setPodName|setEphemeral|setCapability|setAccessMode), uint8(1), int32(7), false, "rw", "", "0")
	f.Add("csi-5f3a9", "/t", "", "", "true", uint8(setEphemeral|setCapability|setAccessMode), uint8(1), int32(1), false, "", "", "")
	f.Add("pv-3", "/t", "", "a/..", "false", uint8(setPodName|setEphemeral|setCapability|setAccessMode), uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t", "../../etc", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t", ".hidden", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "relative/t", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t/../..", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(2), int32(1), false, "", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(0), int32(1), false, "", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(1), int32(0), false, "", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(1), int32(-3), false, "", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", uint8(setVolumeName), uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(1), int32(1), false, "noexec", "", "")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "-1")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "4294967296")
	f.Add("vol-1", "/t", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "flink")
	f.Add("", "/t", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("pv/1", "/t", "", "", "", uint8(setCapability|setAccessMode), uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t\xff", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol\xfe", "/t", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")
	f.Add("vol-1", "/t\x00x", "tm-1", "", "", all, uint8(1), int32(1), false, "", "", "")

	p := fuzzPlugin(f)
	f.Fuzz(func(t *testing.T, volumeID, target, volumeName, podName, ephemeral string, set, accessType uint8, accessMode int32, readonly bool, mountFlags, fsType, group string) {
		vc := map[string]string{}
		if set&setVolumeName != 0 {
			vc[VolumeNameKey] = volumeName
		}
		if set&setPodName != 0 {
			vc[podNameKey] = podName
		}
		if set&setEphemeral != 0 {
			vc[ephemeralKey] = ephemeral
		}
		req := &spec.NodePublishVolumeRequest{VolumeId: volumeID, TargetPath: target, Readonly: readonly, VolumeContext: vc}
		var flags []string
		if mountFlags != "" {
			flags = strings.Split(mountFlags, ",")
		}
		if set&setCapability != 0 {
			c := &spec.VolumeCapability{}
			switch accessType % 3 {
			case 1:
				c.AccessType = &spec.VolumeCapability_Mount{Mount: &spec.VolumeCapability_MountVolume{
					FsType: fsType, MountFlags: flags, VolumeMountGroup: group,
				}}
			case 2:
				c.AccessType = &spec.VolumeCapability_Block{Block: &spec.VolumeCapability_BlockVolume{}}
			}
			if set&setAccessMode != 0 {
				c.AccessMode = &spec.VolumeCapability_AccessMode{Mode: spec.VolumeCapability_AccessMode_Mode(accessMode)}
			}
			req.VolumeCapability = c
		}

		pub, gid, perr := publicationOf(req)
		if perr == nil {
			checkAccepted(t, req, pub, gid)
		}

		_, err := p.NodePublishVolume(context.Background(), req)
		st, ok := status.FromError(err)
		switch {
		case err == nil:
			t.Fatalf("publishing on a mount the daemon does not serve succeeded: %v", req)
		case !ok:
			t.Fatalf("NodePublishVolume returned %v, not a gRPC status", err)
		case perr != nil && st.Code() != codes.InvalidArgument:
			t.Fatalf("a bad request (%v) gave %v, not InvalidArgument", perr, st.Code())
		case perr == nil && st.Code() != codes.Unavailable:
			t.Fatalf("a good request on a mount that is not served gave %v, not Unavailable", err)
		}
		if entries, err := os.ReadDir(p.Mount); err != nil || len(entries) > 0 {
			t.Fatalf("a refused request changed the mountpoint: %v %v", entries, err)
		}
		if _, err := os.Stat(p.StateDir); !os.IsNotExist(err) {
			t.Fatalf("a refused request wrote the state directory: %v", err)
		}
	})
}

// checkAccepted checks what publicationOf made of a request it accepted.
func checkAccepted(t *testing.T, req *spec.NodePublishVolumeRequest, pub *Publication, gid *uint32) {
	t.Helper()
	if !nameRule(pub.Volume) {
		t.Fatalf("accepted volume name %q breaks the name rules", pub.Volume)
	}
	checkOneComponent(t, pub.Volume)
	vc := req.GetVolumeContext()
	want, ok := vc[VolumeNameKey]
	switch {
	case ok:
	case vc[ephemeralKey] == "true":
		want = vc[podNameKey]
	default:
		want = req.GetVolumeId()
	}
	if pub.Volume != want {
		t.Fatalf("request %v names volume %q, want %q", req, pub.Volume, want)
	}
	if pub.VolumeID != req.GetVolumeId() || pub.VolumeID == "" {
		t.Fatalf("publication's volume id %q, request's %q", pub.VolumeID, req.GetVolumeId())
	}
	if !filepath.IsAbs(pub.Target) || pub.Target == "/" || filepath.Clean(pub.Target) != pub.Target ||
		pub.Target != filepath.Clean(req.GetTargetPath()) {
		t.Fatalf("accepted target %q from %q", pub.Target, req.GetTargetPath())
	}
	if req.GetVolumeCapability().GetMount() == nil {
		t.Fatalf("accepted a request without access type mount: %v", req)
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	if mode == spec.VolumeCapability_AccessMode_UNKNOWN {
		t.Fatalf("accepted a request without an access mode")
	}
	ro := req.GetReadonly() || mode == spec.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		mode == spec.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	for _, fl := range req.GetVolumeCapability().GetMount().GetMountFlags() {
		if fl != "ro" && fl != "rw" {
			t.Fatalf("accepted mount flag %q", fl)
		}
		ro = ro || fl == "ro"
	}
	if pub.ReadOnly != ro {
		t.Fatalf("read-only %v, want %v", pub.ReadOnly, ro)
	}
	if g := req.GetVolumeCapability().GetMount().GetVolumeMountGroup(); (g == "") != (gid == nil) {
		t.Fatalf("volume_mount_group %q gave group %v", g, gid)
	}
	// What is published is recorded, and must read back the same: a
	// record that does not is skipped as corrupt, and its target is never
	// bound again.
	checkRoundTrip(t, pub)
}

// checkRoundTrip checks that pub's record decodes to pub.
func checkRoundTrip(t *testing.T, pub *Publication) {
	t.Helper()
	b, err := json.Marshal(pub)
	if err != nil {
		t.Fatalf("encoding %+v: %v", pub, err)
	}
	got, err := decodePublication(b)
	if err != nil {
		t.Fatalf("record %s of an accepted publication does not decode: %v", b, err)
	}
	if *got != *pub {
		t.Fatalf("record %s decodes to %+v, not %+v", b, *got, *pub)
	}
}

// FuzzPublicationRecord feeds decodePublication arbitrary record files: it
// never panics, and a record it accepts is one that a publish request
// could have made (a volume name that passes the name rules, so that the
// tree a rebind binds is one directory below volumes/, and a clean
// absolute target), and encodes back to a record that decodes the same.
func FuzzPublicationRecord(f *testing.F) {
	for _, s := range []string{
		`{"volume_id":"vol-1","volume":"flink-taskmanager-0","target":"/var/lib/kubelet/pods/p/volumes/v/mount","read_only":false}`,
		`{"volume_id":"pv-2","volume":"pv-2","target":"/t","read_only":true}`,
		`{"volume_id":"vol-1","volume":"../../../etc","target":"/t","read_only":false}`,
		`{"volume_id":"vol-1","volume":"","target":"/t"}`,
		`{"volume_id":"vol-1","volume":"tm-1","target":"relative"}`,
		`{"volume_id":"vol-1","volume":"tm-1","target":"/t/../x"}`,
		`{"volume_id":"","volume":"tm-1","target":"/t"}`,
		`{"Volume_ID":"vol-1","VOLUME":"tm-1","target":"/t","read_only":1}`,
		`{"volume_id":"vol-1","volume":"tm-1","target":"/t\u0000x"}`,
		`{"volume_id":"vol-1","volume":"tm-1","target":"/t"} trailing`,
		`null`, `[]`, `{}`, ``, `{"volume_id":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePublication(b)
		if err != nil {
			return
		}
		if !nameRule(p.Volume) {
			t.Fatalf("record %q names volume %q, which breaks the name rules", b, p.Volume)
		}
		checkOneComponent(t, p.Volume)
		if target, err := checkTarget(p.Target, "target"); err != nil || target != p.Target {
			t.Fatalf("record %q has target %q, which a request could not have: %v", b, p.Target, err)
		}
		if p.VolumeID == "" {
			t.Fatalf("record %q has no volume id", b)
		}
		checkRoundTrip(t, p)
	})
}

// FuzzPublicationRoundTrip: a publication whose fields a request could
// have given is recorded and read back unchanged, through the files of a
// state directory; one that breaks the rules is never read back as itself
// (FuzzPublicationRecord checks that whatever is read back keeps them).
func FuzzPublicationRoundTrip(f *testing.F) {
	f.Add("vol-1", "flink-taskmanager-0", "/var/lib/kubelet/pods/p/volumes/v/mount", false)
	f.Add("pv-2", "pv-2", "/t", true)
	f.Add("vol-1", "tm-1", "/t\xff", false)
	f.Add("vol\xfe", "tm-1", "/t", false)
	f.Add("vol-1", "../x", "/t", false)
	f.Add("vol-1", "tm-1", "/t/", false)
	f.Add("vol-1", "tm-1", "/t\u2028\"\\<>&", false)
	f.Fuzz(func(t *testing.T, volumeID, volume, target string, readOnly bool) {
		ps := publications{dir: t.TempDir()}
		want := &Publication{VolumeID: volumeID, Volume: volume, Target: target, ReadOnly: readOnly}
		valid := volumeID != "" && utf8.ValidString(volumeID) && nameRule(volume) && utf8.ValidString(target) &&
			!strings.ContainsRune(target, 0) && filepath.IsAbs(target) && target != "/" && filepath.Clean(target) == target
		if err := ps.put(want); err != nil {
			t.Fatalf("put: %v", err)
		}
		got, err := ps.get(target)
		switch {
		case valid && (err != nil || got == nil || *got != *want):
			t.Fatalf("put %+v, got %+v, %v", *want, got, err)
		case !valid && got != nil && *got == *want:
			t.Fatalf("put %+v, which breaks the rules, and read it back: %+v", *want, got)
		}
		// list reads back what get does.
		all, err := ps.list()
		if err != nil || (got == nil) != (len(all) == 0) || len(all) > 1 || got != nil && *all[0] != *got {
			t.Fatalf("list after putting %+v: %v, %v; get gave %+v", *want, all, err, got)
		}
	})
}
