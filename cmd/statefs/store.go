package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/store"
)

// storeFlag is --store, which every command that takes it needs; the
// environment can give it.
func storeFlag() cli.Flag {
	return required(&cli.StringFlag{Name: "store", EnvVars: []string{"STATEFS_STORE"}, Usage: "the store `DIR`"})
}

// onStore runs a command that changes the --store: directly when no
// daemon serves it, through the daemon's control socket when one does.
// Unlike mount, it never creates a store.
func onStore(c *cli.Context, offline func(*store.Store) error, daemon func(*control.Client) error) error {
	return withStore(c, func(dir string) (*store.Store, error) {
		s, _, err := store.Open(dir)
		return s, err
	}, offline, daemon)
}

// readStore runs a command that only reads the --store, as onStore does;
// offline, the store is opened read-only and not one of its files changes.
func readStore(c *cli.Context, offline func(*store.Store) error, daemon func(*control.Client) error) error {
	return withStore(c, store.OpenReadOnly, offline, daemon)
}

func withStore(c *cli.Context, open func(string) (*store.Store, error), offline func(*store.Store) error, daemon func(*control.Client) error) error {
	dir := c.String("store")
	if err := store.Stat(dir); err != nil {
		return err
	}
	s, err := open(dir)
	if errors.Is(err, store.ErrInUse) {
		client, derr := control.Dial(dir)
		if derr != nil {
			return fmt.Errorf("%w, and %w", err, derr)
		}
		return daemon(client)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	return offline(s)
}
