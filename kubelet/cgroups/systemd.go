package cgroups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// systemdJobTimeout bounds the wait for systemd to finish starting or stopping a slice.
const systemdJobTimeout = 30 * time.Second

// systemdConn is a lazily opened connection to systemd's D-Bus API (the system bus, or systemd's
// private socket when running as root), reopened after a failure.
type systemdConn struct {
	mu   sync.Mutex
	conn *sddbus.Conn
}

func (s *systemdConn) get(ctx context.Context) (*sddbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	c, err := sddbus.NewWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("systemd cgroup driver: connect to systemd over D-Bus: %w", err)
	}
	s.conn = c
	return c, nil
}

// ensure starts the slice unit with props, or sets props on it when it exists already.
func (s *systemdConn) ensure(ctx context.Context, unit string, props []sddbus.Property) error {
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	start := append([]sddbus.Property{
		sddbus.PropDescription("nodekit kubelet cgroup " + unit),
		{Name: "DefaultDependencies", Value: godbus.MakeVariant(false)},
	}, props...)
	done := make(chan string, 1)
	_, err = c.StartTransientUnitContext(ctx, unit, "replace", start, done)
	var de godbus.Error
	switch {
	case errors.As(err, &de) && de.Name == "org.freedesktop.systemd1.UnitExists":
		if err := c.SetUnitPropertiesContext(ctx, unit, true, props...); err != nil {
			return fmt.Errorf("systemd cgroup driver: set properties of %s: %w", unit, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("systemd cgroup driver: start %s: %w", unit, err)
	}
	return waitJob(ctx, "start", unit, done)
}

// stop stops the slice unit; a unit systemd does not know is fine.
func (s *systemdConn) stop(ctx context.Context, unit string) error {
	c, err := s.get(ctx)
	if err != nil {
		return err
	}
	done := make(chan string, 1)
	_, err = c.StopUnitContext(ctx, unit, "replace", done)
	var de godbus.Error
	switch {
	case errors.As(err, &de) && de.Name == "org.freedesktop.systemd1.NoSuchUnit":
		return nil
	case err != nil:
		return fmt.Errorf("systemd cgroup driver: stop %s: %w", unit, err)
	}
	return waitJob(ctx, "stop", unit, done)
}

func waitJob(ctx context.Context, verb, unit string, done <-chan string) error {
	t := time.NewTimer(systemdJobTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("systemd cgroup driver: %s %s: job %s", verb, unit, r)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("systemd cgroup driver: %s %s: no answer from systemd in %v", verb, unit, systemdJobTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// systemdProperties are the unit properties of r, as runc's systemd driver sets them: CPUWeight (v2)
// or CPUShares (v1), CPUQuotaPerSecUSec and CPUQuotaPeriodUSec, MemoryMax (v2) or MemoryLimit (v1),
// TasksMax, with the accounting they need. systemd's "infinity" is the maximum uint64.
func systemdProperties(v2 bool, r Resources) []sddbus.Property {
	prop := func(name string, v any) sddbus.Property {
		return sddbus.Property{Name: name, Value: godbus.MakeVariant(v)}
	}
	limit := func(v int64) uint64 {
		if v < 0 {
			return ^uint64(0)
		}
		return uint64(v)
	}
	var out []sddbus.Property
	if r.CPUShares != nil || r.CPUQuota != nil {
		out = append(out, prop("CPUAccounting", true))
	}
	if r.CPUShares != nil {
		if v2 {
			out = append(out, prop("CPUWeight", SharesToWeight(*r.CPUShares)))
		} else {
			out = append(out, prop("CPUShares", *r.CPUShares))
		}
	}
	if r.CPUQuota != nil {
		perSec := ^uint64(0)
		if *r.CPUQuota >= 0 {
			// systemd rounds the quota to 10 ms per second of CPU time, as runc does before passing it.
			perSec = uint64(*r.CPUQuota) * 1000000 / period(r)
			if rem := perSec % 10000; rem != 0 {
				perSec += 10000 - rem
			}
		}
		out = append(out, prop("CPUQuotaPerSecUSec", perSec), prop("CPUQuotaPeriodUSec", period(r)))
	}
	if r.Memory != nil {
		name := "MemoryLimit"
		if v2 {
			name = "MemoryMax"
		}
		out = append(out, prop("MemoryAccounting", true), prop(name, limit(*r.Memory)))
	}
	if r.Pids != nil {
		out = append(out, prop("TasksAccounting", true), prop("TasksMax", limit(*r.Pids)))
	}
	return out
}
