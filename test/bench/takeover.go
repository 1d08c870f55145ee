package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/statefs/statefs/internal/testenv"
)

// takeoverSpacing is how far apart workload 6 kills statefs's server. It is
// well over the keeper's crash-loop window (servers that die within 250 ms
// of serving end the mount), so every kill is taken over.
const takeoverSpacing = 1500 * time.Millisecond

// takeoverKills is how many times workload 6 kills statefs's server at
// least: its row is the median over the kills.
const takeoverKills = 10

// nextKill is when kill i (from 0) is due: a third of takeoverSpacing after
// start, then takeoverSpacing apart, but never sooner than a third of it
// after the previous takeover's first answer (zero for none), so that a
// takeover slower than the spacing is not followed by a kill of a server
// that has only just begun to serve, which the keeper would count towards
// a crash loop.
func nextKill(start time.Time, i int, lastAnswer time.Time) time.Time {
	due := start.Add(takeoverSpacing/3 + takeoverSpacing*time.Duration(i))
	if earliest := lastAnswer.Add(takeoverSpacing / 3); !lastAnswer.IsZero() && earliest.After(due) {
		return earliest
	}
	return due
}

// takeoverHeldFile is the file a client of the takeovers keeps open and
// reads across them, and heldContent what it holds.
const takeoverHeldFile = "takeover-held"

var heldContent = bytes.Repeat([]byte("statefs takeover "), 4096)

// statOp is one answered stat of the takeovers' stat loop.
type statOp struct{ start, end time.Time }

// takeoverMetrics are the rows the takeovers fill.
type takeoverMetrics struct {
	firstAnswer, p99, worst *Metric
}

// statLog is what the stat loop has done so far, read by the kill loop
// while the stat loop appends to it.
type statLog struct {
	mu   sync.Mutex
	ops  []statOp
	err  error
	done bool // the loop stopped: asked to, out of files, or failed
}

// answeredSince is the first stat that started at or after t, if one has
// been answered.
func (l *statLog) answeredSince(t time.Time) (statOp, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.ops, t, func(op statOp, t time.Time) int { return op.start.Compare(t) })
	if i == len(l.ops) {
		return statOp{}, false
	}
	return l.ops[i], true
}

// stalls are the p99 and the highest latency, in ms, of the stats that
// ended at or after from: what a client saw across the kills.
func stalls(ops []statOp, from time.Time) (p99, worst float64, n int) {
	var ms []float64
	for _, op := range ops {
		if !op.end.Before(from) {
			ms = append(ms, op.end.Sub(op.start).Seconds()*1000)
		}
	}
	if len(ms) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ms)
	return ms[(len(ms)*99+99)/100-1], ms[len(ms)-1], len(ms)
}

// takeovers SIGKILLs the server of the running statefs (not its keeper)
// kills times, takeoverSpacing apart, while one client stats the n inodes
// of workload 6 in random order, each once, spread over the kills so each
// stat asks the server rather than the kernel's caches, and another reads
// a file it keeps open. Per kill it records the time to the first stat
// that started after it and was answered; across the kills, the p99 and
// the highest latency of a stat. An error of either client fails it.
func (b *bench) takeovers(w *Workload, kills int, m takeoverMetrics) error {
	t := b.statefs
	if t.d == nil {
		return errors.New("takeovers: statefs is not running")
	}
	keeper := t.d.cmd.Process.Pid
	held := filepath.Join(t.mnt, takeoverHeldFile)
	if err := os.WriteFile(held, heldContent, 0o644); err != nil {
		return err
	}
	defer os.Remove(held)
	f, err := os.Open(held)
	if err != nil {
		return err
	}
	defer f.Close()

	n := b.cfg.Restart.Inodes
	phase := takeoverSpacing * time.Duration(kills)
	interval := phase / time.Duration(n)
	stop := make(chan struct{})
	var log statLog
	var wg sync.WaitGroup
	var reads int
	var readErr error
	start := time.Now()
	wg.Add(2)
	go func() {
		defer wg.Done()
		statLoop(&log, t.mnt, rand.Perm(n), start, interval, stop)
	}()
	go func() {
		defer wg.Done()
		reads, readErr = readLoop(f, stop)
	}()

	firstKill, killErr := b.killServers(keeper, kills, start, &log, m.firstAnswer)
	time.Sleep(300 * time.Millisecond) // stats after the last takeover, in the stalls
	close(stop)
	wg.Wait()
	if killErr == nil {
		killErr = log.err // else it holds the stat loop's error already, if any
	}
	if err := errors.Join(killErr, readErr); err != nil {
		return err
	}
	p99, worst, stats := stalls(log.ops, firstKill)
	m.p99.add(statefs, p99)
	m.worst.add(statefs, worst)
	w.note("the takeovers' clients saw no error: %d stats of distinct files from the first kill on (p99 %.2f ms, highest %.1f ms), %d reads of a file held open across the kills",
		stats, p99, worst, reads)
	return nil
}

// killServers kills keeper's server kills times, when nextKill says, each
// once its predecessor's successor serves, and adds to firstAnswer the ms
// from each kill to the first stat started after it that was answered. It
// returns when it killed first.
func (b *bench) killServers(keeper, kills int, start time.Time, log *statLog, firstAnswer *Metric) (first time.Time, err error) {
	killed := 0
	var answered time.Time
	for i := range kills {
		time.Sleep(time.Until(nextKill(start, i, answered)))
		server, err := serverAfter(keeper, killed)
		if err != nil {
			return first, err
		}
		at := time.Now()
		if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
			return first, fmt.Errorf("kill server %d: %w", server, err)
		}
		killed = server
		if i == 0 {
			first = at
		}
		for {
			op, ok := log.answeredSince(at)
			if ok {
				answered = op.end
				ms := op.end.Sub(at).Seconds() * 1000
				firstAnswer.add(statefs, ms)
				b.logf("  takeover %d/%d: first stat answered %.1f ms after SIGKILL of server %d", i+1, kills, ms, server)
				break
			}
			log.mu.Lock()
			done, err := log.done, log.err
			log.mu.Unlock()
			if err != nil {
				return first, fmt.Errorf("takeover %d/%d: %w", i+1, kills, err)
			}
			if done || time.Since(at) > 30*time.Second {
				return first, fmt.Errorf("takeover %d/%d: no stat answered in the %.1f s after SIGKILL of server %d (the stat loop stops after each inode once: raise --restart-inodes if it ran out)",
					i+1, kills, time.Since(at).Seconds(), server)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return first, nil
}

// serverAfter is keeper's live child other than the one last killed,
// waiting up to 10 s for the keeper to start it.
func serverAfter(keeper, killed int) (int, error) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if pid, ok := testenv.ChildOf(keeper); ok && pid != killed {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("statefs mount (pid %d) has no server process 10 s after the last kill: it runs with --keeper=false, or its keeper gave up", keeper)
}

// statLoop lstats the inodes in order, the i-th not before start plus i
// intervals, until stop is closed or every one has been stat'ed, and logs
// each and its first error: any is a client's failure.
func statLoop(log *statLog, root string, order []int, start time.Time, interval time.Duration, stop <-chan struct{}) (err error) {
	defer func() {
		log.mu.Lock()
		log.done = true
		log.err = err
		log.mu.Unlock()
	}()
	for i, inode := range order {
		select {
		case <-stop:
			return nil
		default:
		}
		time.Sleep(time.Until(start.Add(interval * time.Duration(i))))
		path := filepath.Join(root, "inodes", dirName(inode/inodesPerDir), fileName(inode))
		opStart := time.Now()
		if _, err := os.Lstat(path); err != nil {
			return fmt.Errorf("stat client: %w", err)
		}
		log.mu.Lock()
		log.ops = append(log.ops, statOp{opStart, time.Now()})
		log.mu.Unlock()
	}
	return nil
}

// readLoop reads f whole every millisecond until stop is closed, and
// checks what it reads.
func readLoop(f *os.File, stop <-chan struct{}) (reads int, err error) {
	buf := make([]byte, len(heldContent)+1)
	for {
		select {
		case <-stop:
			return reads, nil
		default:
		}
		got, err := f.ReadAt(buf, 0)
		if got != len(heldContent) || !bytes.Equal(buf[:got], heldContent) {
			return reads, fmt.Errorf("read client, read %d of a file held open: %d bytes (%v), want %d as written", reads+1, got, err, len(heldContent))
		}
		reads++
		time.Sleep(time.Millisecond)
	}
}
