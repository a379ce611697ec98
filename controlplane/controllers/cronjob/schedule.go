package cronjob

import (
	"errors"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
)

// missed says how many start times passed unrun since a CronJob's last schedule.
type missed int

const (
	noneMissed missed = iota
	fewMissed
	// manyMissed is more than tooManyMissed: the controller does not enumerate them and warns.
	manyMissed
)

// tooManyMissed is upstream's bound on the missed start times counted (a wedged controller or a
// clock off by years must not make it walk every one).
const tooManyMissed = 100

// nextScheduleDelta pads a requeue at the next start time against small clock skews (upstream's 100 ms).
const nextScheduleDelta = 100 * time.Millisecond

// mostRecent finds the latest start time of sched at or before now that comes after the CronJob's last
// schedule (or, never scheduled, its creation). With deadline, spec.startingDeadlineSeconds moves that
// lower bound up to now minus the deadline: older start times are not run anyway. It returns the
// lower bound used, the start time (nil when none is due), how many were missed (a rough count: the
// span over the interval between two start times), and an error for a schedule whose two next start
// times are less than a second apart (such as February 31st, which never comes).
func mostRecent(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, deadline bool) (time.Time, *time.Time, missed, error) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if deadline && cj.Spec.StartingDeadlineSeconds != nil {
		if d := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second); d.After(earliest) {
			earliest = d
		}
	}
	first := sched.Next(earliest)
	second := sched.Next(first)
	switch {
	case now.Before(first):
		return earliest, nil, noneMissed, nil
	case now.Before(second):
		return earliest, &first, noneMissed, nil
	}
	interval := int64(second.Sub(first).Round(time.Second).Seconds())
	if interval < 1 {
		return earliest, nil, noneMissed, errors.New("time difference between two schedules is less than 1 second")
	}
	count := int64(now.Sub(first).Seconds())/interval + 1
	kind := fewMissed
	if count > tooManyMissed {
		kind = manyMissed
	}
	// Walk from two intervals before the estimated last start time, so irregular schedules
	// ("30 6-16/4 * * 1-5") and @every ones land on their real start times.
	var latest time.Time
	for t := sched.Next(first.Add(time.Duration((count-2)*interval) * time.Second)); !t.After(now); t = sched.Next(t) {
		latest = t
	}
	if latest.IsZero() {
		return earliest, nil, kind, nil
	}
	return earliest, &latest, kind, nil
}

// requeueAfter is how long from now until the CronJob's next start time (plus nextScheduleDelta):
// the controller syncs it again then, and otherwise only on changes.
func requeueAfter(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	earliest, latest, kind, err := mostRecent(cj, now, sched, false)
	base := now
	switch {
	case err != nil:
	case latest != nil:
		base = *latest
	case kind == noneMissed:
		base = earliest
	}
	return sched.Next(base).Add(nextScheduleDelta).Sub(now)
}

// jobName is the name of the CronJob's Job for start time t: <cronjob>-<minutes since the epoch>, so
// one start time never gets two Jobs.
func jobName(cj *batchv1.CronJob, t time.Time) string {
	return cj.Name + "-" + strconv.FormatInt(t.Unix()/60, 10)
}
