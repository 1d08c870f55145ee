package keeper

import "testing"

// White-box: which kernels a server takes for ones that send requests
// again, by their release.
func TestReleaseResends(t *testing.T) {
	for release, want := range map[string]bool{
		"6.9.0":             true,
		"6.18.0-1-amd64":    true,
		"6.10.3-arch1-1":    true,
		"7.0.0":             true,
		"6.8.12":            false,
		"6.1.0-28-cloud":    false,
		"5.15.0-91-generic": false,
		"4.18.0-553.el8":    false,
		"":                  false,
		"linux":             false,
	} {
		if got := releaseResends(release); got != want {
			t.Errorf("release %q: resends %v, want %v", release, got, want)
		}
	}
}

// NoResendEnvVar makes any kernel one that does not.
func TestNoResendEnvVar(t *testing.T) {
	t.Setenv(NoResendEnvVar, "1")
	if KernelResends() {
		t.Fatalf("KernelResends with %s set", NoResendEnvVar)
	}
}
