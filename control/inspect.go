package control

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"

	"github.com/statefs/statefs/store"
)

// The answers of /inspect and /du are the store's reports
// (store.Store.Inspect and DU, store/report.go), made by the daemon on the
// store it serves.

// inspect takes a path relative to the mount root, or, as restore does,
// an absolute path inside the daemon's mount.
func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	if filepath.IsAbs(path) {
		rel, err := s.inMount(path)
		if err != nil {
			reply(w, nil, err)
			return
		}
		path = rel
	}
	if err := store.CheckPath(path); err != nil {
		reply(w, nil, err)
		return
	}
	in, err := s.Store.Inspect(path)
	reply(w, in, err)
}

func (s *Server) du(w http.ResponseWriter, r *http.Request) {
	by, err := store.ParseGrouping(r.URL.Query().Get("by"))
	if err != nil {
		reply(w, nil, err)
		return
	}
	du, err := s.Store.DU(by)
	reply(w, du, err)
}

// Inspect describes the inode at path on the daemon's store.
func (c *Client) Inspect(ctx context.Context, path string) (*store.Inspection, error) {
	var in store.Inspection
	err := c.call(ctx, http.MethodGet, "/inspect?"+url.Values{"path": {path}}.Encode(), nil, &in)
	return &in, err
}

// DU sums the daemon's store by owner.
func (c *Client) DU(ctx context.Context, by store.Grouping) (*store.DiskUsage, error) {
	var du store.DiskUsage
	err := c.call(ctx, http.MethodGet, "/du?"+url.Values{"by": {string(by)}}.Encode(), nil, &du)
	return &du, err
}
