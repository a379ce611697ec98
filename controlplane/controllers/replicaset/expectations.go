package replicaset

import (
	"sync"
	"time"
)

// expectationsTTL bounds how long the controller trusts outstanding expectations; after it a lost
// watch event cannot wedge a ReplicaSet (upstream ExpectationsTimeout is 5 min; shorter here because
// nodekit's clusters are small).
const expectationsTTL = time.Minute

// expectations counts the pod creations and deletions a ReplicaSet has asked for and the informer has
// not yet shown, so the next sync does not act again on a stale cache (upstream ControllerExpectations).
type expectations struct {
	mu sync.Mutex
	m  map[string]*expectation
}

type expectation struct {
	adds, dels int
	set        time.Time
}

func newExpectations() *expectations { return &expectations{m: map[string]*expectation{}} }

// expect records adds creations and dels deletions about to be issued for key.
func (e *expectations) expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: adds, dels: dels, set: time.Now()}
}

// observe lowers key's outstanding creations (add) or deletions (!add) by one.
func (e *expectations) observe(key string, add bool) {
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

// satisfied reports whether key has nothing outstanding (or its expectations expired).
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	return !ok || (x.adds <= 0 && x.dels <= 0) || time.Since(x.set) > expectationsTTL
}

func (e *expectations) delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
