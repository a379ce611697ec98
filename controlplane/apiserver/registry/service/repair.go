package service

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apiserver/pkg/registry/rest"
)

// RunRepair releases leaked ClusterIPs and NodePorts every interval until ctx is done, comparing the
// allocations with the stored services (see allocator.Range.Repair), as kube-apiserver's repair
// controllers do.
func (a Allocators) RunRepair(ctx context.Context, services rest.Lister, interval time.Duration) {
	var ipSuspects, portSuspects map[string]int64
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		obj, err := services.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			slog.Warn("service allocation repair: list services", "err", err)
			continue
		}
		ips, ports := map[string]bool{}, map[string]bool{}
		for _, svc := range obj.(*corev1.ServiceList).Items {
			for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
				ips[ip] = true
			}
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports[strconv.Itoa(int(p.NodePort))] = true
				}
			}
		}
		var released []string
		if ipSuspects, released, err = a.IPs.Repair(ctx, ips, ipSuspects); err != nil {
			slog.Warn("service allocation repair", "err", err)
		}
		for _, v := range released {
			slog.Info("released leaked ClusterIP", "ip", v)
		}
		if portSuspects, released, err = a.NodePorts.Repair(ctx, ports, portSuspects); err != nil {
			slog.Warn("service allocation repair", "err", err)
		}
		for _, v := range released {
			slog.Info("released leaked NodePort", "nodePort", v)
		}
	}
}
