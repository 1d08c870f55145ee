package control

import (
	"context"
	"net/http"
	"net/url"

	"github.com/statefs/statefs/store"
)

// The answers of /inspect and /du are the store's reports
// (store.Store.Inspect and DU, store/report.go), made by the daemon on the
// store it serves.

func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	in, err := s.Store.Inspect(r.URL.Query().Get("path"))
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
