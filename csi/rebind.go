package csi

import (
	"errors"
	"fmt"
	"log/slog"
)

// RebindStale binds every published target whose mount went stale (the
// daemon restarted, so the bind points at its dead FUSE connection) onto the
// volume's tree in the daemon's current mount. It does nothing while that
// mount is not serving, and returns how many targets it bound. Targets that
// are not mounted at all are left alone: whether to publish them again is
// the CO's call. Serve runs it at start and every Rebind.
func (p *Plugin) RebindStale() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := checkServing(p.Mount); err != nil {
		return 0, err
	}
	pubs, err := p.records().list()
	if err != nil {
		return 0, err
	}
	var n int
	var errs []error
	for _, pub := range pubs {
		state, err := stateOf(pub.Target, p.volumeRoot(pub.Volume))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if state != stale {
			continue
		}
		if err := p.bindAgain(pub); err != nil {
			errs = append(errs, fmt.Errorf("volume %s at %s: %w", pub.Volume, pub.Target, err))
			continue
		}
		slog.Info("bound a stale target again", "volume", pub.Volume, "target", pub.Target)
		n++
	}
	return n, errors.Join(errs...)
}

// bindAgain replaces pub's stale bind with a live one. It does not create
// the volume's tree: a tree that was published and is gone now is lost
// state, which an empty tree would hide.
func (p *Plugin) bindAgain(pub *Publication) error {
	if err := detachStale(pub.Target); err != nil {
		return err
	}
	return bind(p.volumeRoot(pub.Volume), pub.Target, pub.ReadOnly)
}
