// Package cronschedule parses a batch/v1 CronJob's spec.schedule and spec.timeZone as
// kube-controller-manager and kube-apiserver do: the standard five-field cron format and the
// @yearly/@monthly/@weekly/@daily/@hourly/@every descriptors of github.com/robfig/cron/v3
// (cron.ParseStandard), with spec.timeZone applied as a "TZ=<zone> " prefix. The API server's
// validation and the CronJob controller both parse through here, so a schedule the API accepts is one
// the controller can run.
package cronschedule

import (
	"fmt"
	"strings"
	"time"
	// The zone database is built in, as in kube-apiserver and kube-controller-manager: a host without
	// /usr/share/zoneinfo still knows every spec.timeZone.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Parse parses a standard cron schedule (five fields, or a descriptor such as "@hourly" or
// "@every 90s"; an optional "TZ=<zone> " or "CRON_TZ=<zone> " prefix picks the zone). A schedule the
// cron library panics on is an error, as upstream's ParseCronScheduleWithPanicRecovery makes it.
func Parse(schedule string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("parse error for cron schedule %q: %v", schedule, r)
		}
	}()
	return cron.ParseStandard(schedule)
}

// HasTZ reports whether schedule names its zone itself (a TZ= or CRON_TZ= prefix, which the API
// refuses on create in favour of spec.timeZone; upstream matches any "TZ" in the string).
func HasTZ(schedule string) bool { return strings.Contains(schedule, "TZ") }

// Format is the schedule the controller parses for a CronJob: schedule as written when it carries a
// TZ itself or timeZone is nil or does not load, else "TZ=<timeZone> <schedule>" (upstream
// formatSchedule).
func Format(schedule string, timeZone *string) string {
	if HasTZ(schedule) || timeZone == nil {
		return schedule
	}
	if _, err := time.LoadLocation(*timeZone); err != nil {
		return schedule
	}
	return "TZ=" + *timeZone + " " + schedule
}
