// Package expectations counts the pod creations and deletions a controller has asked for and its
// informer has not yet shown, so the next sync does not act again on a stale cache (upstream
// ControllerExpectations, shared by the ReplicaSet, DaemonSet and Job controllers).
package expectations

import (
	"sync"
	"time"
)

// TTL bounds how long a controller trusts outstanding expectations; after it a lost watch event
// cannot wedge an object (upstream ExpectationsTimeout is 5 min; shorter here because nodekit's
// clusters are small).
const TTL = time.Minute

// Expectations maps an owner's queue key to its outstanding creations and deletions. The zero value
// is not usable; call New.
type Expectations struct {
	mu sync.Mutex
	m  map[string]*expectation
}

type expectation struct {
	adds, dels int
	set        time.Time
}

// New returns empty expectations.
func New() *Expectations { return &Expectations{m: map[string]*expectation{}} }

// Expect records adds creations and dels deletions about to be issued for key, replacing what key
// had outstanding.
func (e *Expectations) Expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: adds, dels: dels, set: time.Now()}
}

// Observe lowers key's outstanding creations (add) or deletions (!add) by one: the informer showed
// one, or the request failed and will not show.
func (e *Expectations) Observe(key string, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		if add {
			x.adds--
		} else {
			x.dels--
		}
	}
}

// Satisfied reports whether key has nothing outstanding (or its expectations are older than TTL).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	return !ok || (x.adds <= 0 && x.dels <= 0) || time.Since(x.set) > TTL
}

// Delete forgets key (its owner is gone).
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
