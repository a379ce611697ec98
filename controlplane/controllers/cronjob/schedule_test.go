package cronjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/cronschedule"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func schedCJ(schedule string, created string) *batchv1.CronJob {
	return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "cj", Namespace: "default", CreationTimestamp: metav1.NewTime(at(created))},
		Spec: batchv1.CronJobSpec{Schedule: schedule}}
}

// TestMostRecentAndRequeue: the start time due (if any), the missed count and the requeue delay for
// fixed clock readings.
func TestMostRecentAndRequeue(t *testing.T) {
	cases := []struct {
		name, schedule, created, last, now string
		tz                                 *string
		deadline                           *int64
		wantDue                            string // "" none
		wantMissed                         missed
		wantRequeue                        time.Duration
	}{
		{name: "before the first start", schedule: "*/5 * * * *", created: "2026-12-01T10:00:30Z", now: "2026-12-01T10:03:00Z",
			wantRequeue: 2*time.Minute + nextScheduleDelta},
		{name: "first start due", schedule: "*/5 * * * *", created: "2026-12-01T10:00:30Z", now: "2026-12-01T10:05:10Z",
			wantDue: "2026-12-01T10:05:00Z", wantRequeue: 4*time.Minute + 50*time.Second + nextScheduleDelta},
		{name: "start time already taken", schedule: "*/5 * * * *", created: "2026-12-01T10:00:30Z", last: "2026-12-01T10:05:00Z",
			now: "2026-12-01T10:06:00Z", wantRequeue: 4*time.Minute + nextScheduleDelta},
		{name: "a few missed: the latest runs", schedule: "*/5 * * * *", created: "2026-12-01T10:00:30Z", now: "2026-12-01T10:17:00Z",
			wantDue: "2026-12-01T10:15:00Z", wantMissed: fewMissed, wantRequeue: 3*time.Minute + nextScheduleDelta},
		{name: "too many missed", schedule: "* * * * *", created: "2026-12-01T07:00:00Z", now: "2026-12-01T10:00:30Z",
			wantDue: "2026-12-01T10:00:00Z", wantMissed: manyMissed, wantRequeue: 30*time.Second + nextScheduleDelta},
		{name: "starting deadline hides an old start", schedule: "*/5 * * * *", created: "2026-12-01T10:00:30Z", now: "2026-12-01T10:07:00Z",
			deadline: ptr.To[int64](60), wantRequeue: 3*time.Minute + nextScheduleDelta},
		{name: "starting deadline keeps a recent start", schedule: "*/5 * * * *", created: "2026-12-01T10:00:30Z", now: "2026-12-01T10:05:50Z",
			deadline: ptr.To[int64](60), wantDue: "2026-12-01T10:05:00Z", wantRequeue: 4*time.Minute + 10*time.Second + nextScheduleDelta},
		{name: "@every", schedule: "@every 90s", created: "2026-12-01T10:00:00Z", now: "2026-12-01T10:01:40Z",
			wantDue: "2026-12-01T10:01:30Z", wantRequeue: 80*time.Second + nextScheduleDelta},
		{name: "time zone", schedule: "0 9 * * *", tz: ptr.To("Asia/Tokyo"), created: "2026-11-30T12:00:00Z", now: "2026-12-01T00:00:05Z",
			wantDue: "2026-12-01T00:00:00Z", wantRequeue: 24*time.Hour - 5*time.Second + nextScheduleDelta},
		{name: "time zone, not yet", schedule: "0 9 * * *", tz: ptr.To("Asia/Tokyo"), created: "2026-11-30T12:00:00Z", now: "2026-11-30T23:00:00Z",
			wantRequeue: time.Hour + nextScheduleDelta},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cj := schedCJ(tc.schedule, tc.created)
			cj.Spec.TimeZone, cj.Spec.StartingDeadlineSeconds = tc.tz, tc.deadline
			if tc.last != "" {
				cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(at(tc.last)))
			}
			sched, err := cronschedule.Parse(cronschedule.Format(cj.Spec.Schedule, cj.Spec.TimeZone))
			if err != nil {
				t.Fatal(err)
			}
			now := at(tc.now)
			_, due, kind, err := mostRecent(cj, now, sched, true)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantDue == "" && due != nil:
				t.Errorf("due %v, want none", due)
			case tc.wantDue != "" && (due == nil || !due.Equal(at(tc.wantDue))):
				t.Errorf("due %v, want %s", due, tc.wantDue)
			}
			if kind != tc.wantMissed {
				t.Errorf("missed %v, want %v", kind, tc.wantMissed)
			}
			// After the due start is taken, the next sync is at the following start time.
			if due != nil {
				cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(*due))
			}
			if got := requeueAfter(cj, now, sched); got != tc.wantRequeue {
				t.Errorf("requeue after %v, want %v", got, tc.wantRequeue)
			}
		})
	}
}

// TestImpossibleSchedule: February 31st parses but never comes; it is an error, not a busy loop.
func TestImpossibleSchedule(t *testing.T) {
	sched, err := cronschedule.Parse("59 23 31 2 *")
	if err != nil {
		t.Fatal(err)
	}
	cj := schedCJ("59 23 31 2 *", "2026-12-01T10:00:00Z")
	if _, _, _, err := mostRecent(cj, at("2026-12-01T10:00:00Z"), sched, true); err == nil {
		t.Fatal("no error for a schedule that never fires")
	}
}

func TestJobName(t *testing.T) {
	cj := schedCJ("* * * * *", "2026-12-01T10:00:00Z")
	if got, want := jobName(cj, at("2026-12-01T10:05:00Z")), "cj-29935325"; got != want {
		t.Fatalf("job name %s, want %s", got, want)
	}
}
