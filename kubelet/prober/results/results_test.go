package results

import (
	"context"
	"testing"
	"time"
)

// drain returns the updates queued so far.
func drain(m *Manager) []Update {
	var out []Update
	for {
		select {
		case u := <-m.Updates():
			out = append(out, u)
		default:
			return out
		}
	}
}

func TestSetAnnouncesChangesOnly(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		probe ProbeType
		seq   []Result
		news  []bool
	}{
		// Without a recorded result a liveness Success is no news (the container counts as healthy).
		{"liveness", Liveness, []Result{Success, Success, Failure, Failure, Success}, []bool{false, false, true, false, true}},
		{"readiness", Readiness, []Result{Success, Success, Failure, Success}, []bool{true, false, true, true}},
		{"readiness first failure", Readiness, []Result{Failure, Failure}, []bool{true, false}},
		{"startup", Startup, []Result{Failure, Success, Success}, []bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			for i, r := range tc.seq {
				u := Update{PodUID: "uid-1", ContainerName: "c", ContainerID: "containerd://a", Probe: tc.probe, Result: r, Message: r.String()}
				if news := m.Set(ctx, u); news != tc.news[i] {
					t.Fatalf("Set #%d (%s): news %v, want %v", i, r, news, tc.news[i])
				}
				got := drain(m)
				if !tc.news[i] {
					if len(got) != 0 {
						t.Fatalf("Set #%d (%s) sent %+v", i, r, got)
					}
				} else if len(got) != 1 || got[0] != u {
					t.Fatalf("Set #%d (%s) sent %+v, want [%+v]", i, r, got, u)
				}
				if g, ok := m.Get("containerd://a", tc.probe); !ok || g != r {
					t.Fatalf("Get after Set #%d = %s, %v; want %s", i, g, ok, r)
				}
			}
		})
	}
}

func TestResultsAreKeyedByInstanceAndProbe(t *testing.T) {
	ctx := context.Background()
	m := NewManager()
	m.Set(ctx, Update{ContainerID: "containerd://a", Probe: Readiness, Result: Success})
	m.Set(ctx, Update{ContainerID: "containerd://a", Probe: Startup, Result: Failure})
	m.Set(ctx, Update{ContainerID: "containerd://b", Probe: Readiness, Result: Failure})
	for _, c := range []struct {
		id    string
		probe ProbeType
		want  Result
		ok    bool
	}{
		{"containerd://a", Readiness, Success, true},
		{"containerd://a", Startup, Failure, true},
		{"containerd://a", Liveness, Unknown, false},
		{"containerd://b", Readiness, Failure, true},
	} {
		if r, ok := m.Get(c.id, c.probe); r != c.want || ok != c.ok {
			t.Errorf("Get(%s, %s) = %s, %v; want %s, %v", c.id, c.probe, r, ok, c.want, c.ok)
		}
	}
	m.Remove("containerd://a", Readiness)
	if r, ok := m.Get("containerd://a", Readiness); ok {
		t.Fatalf("Readiness of a kept after Remove: %s", r)
	}
	if r, ok := m.Get("containerd://a", Startup); !ok || r != Failure {
		t.Fatalf("Remove of Readiness dropped Startup: %s, %v", r, ok)
	}
	if got := drain(m); len(got) != 3 {
		t.Fatalf("%d updates, want 3 (Remove sends none)", len(got))
	}
	// After Remove the same result is news again.
	if !m.Set(ctx, Update{ContainerID: "containerd://a", Probe: Readiness, Result: Success}) {
		t.Fatal("a result set after Remove was not news")
	}
}

// TestSetAfterCancelRecordsNothing: a writer whose ctx ended (a stopped worker) leaves no result behind,
// and a Set blocked on a full Updates ends with its ctx.
func TestSetAfterCancelRecordsNothing(t *testing.T) {
	m := NewManager()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m.Set(ctx, Update{ContainerID: "containerd://a", Probe: Readiness, Result: Success}) {
		t.Fatal("Set with an ended ctx reported news")
	}
	if r, ok := m.Get("containerd://a", Readiness); ok {
		t.Fatalf("Set with an ended ctx recorded %s", r)
	}

	for i := 0; i < DefaultUpdatesBuffer; i++ {
		m.Set(context.Background(), Update{ContainerID: "containerd://fill", Probe: Readiness, Result: Result(1 + i%2)})
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- m.Set(ctx, Update{ContainerID: "containerd://b", Probe: Readiness, Result: Failure}) }()
	select {
	case <-done:
		t.Fatal("Set returned with Updates full and nobody reading")
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case news := <-done:
		if !news {
			t.Fatal("the blocked Set reported no news")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Set still blocked after its ctx ended")
	}
	if n := len(drain(m)); n != DefaultUpdatesBuffer {
		t.Fatalf("%d updates queued, want %d", n, DefaultUpdatesBuffer)
	}
}

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{Unknown: "Unknown", Success: "Success", Failure: "Failure", Result(7): "Unknown"} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}

// TestSeed: a seeded result is recorded silently, never replaces a recorded one, and a later Set of the
// same result is no news while a different one is.
func TestSeed(t *testing.T) {
	ctx := context.Background()
	m := NewManager()
	if !m.Seed("containerd://a", Readiness, Success) {
		t.Fatal("Seed of an empty cache recorded nothing")
	}
	if m.Seed("containerd://a", Readiness, Failure) {
		t.Fatal("Seed replaced a recorded result")
	}
	if r, ok := m.Get("containerd://a", Readiness); !ok || r != Success {
		t.Fatalf("Get after Seed = %v, %v; want Success", r, ok)
	}
	if us := drain(m); len(us) != 0 {
		t.Fatalf("Seed announced %+v", us)
	}
	u := Update{PodUID: "uid-1", ContainerName: "c", ContainerID: "containerd://a", Probe: Readiness, Result: Success}
	if m.Set(ctx, u) {
		t.Fatal("Set of the seeded result was news")
	}
	u.Result = Failure
	if !m.Set(ctx, u) {
		t.Fatal("Set of a failure over a seeded success was no news")
	}
}
