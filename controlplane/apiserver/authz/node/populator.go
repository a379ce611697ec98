package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Populate feeds g from pod and claim informers over client (the API server's loopback client) until ctx ends,
// as upstream's graph populator: a pod is added when it is bound to a node and replaced on every change
// that matters (binding, volumes, containers' env, service account), and removed when deleted. It
// returns once the informer has synced (or ctx ended, with ctx's error).
func Populate(ctx context.Context, client kubernetes.Interface, g *Graph) error {
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				g.AddPod(p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				g.AddPod(p)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				g.DeletePod(p.Namespace, p.Name)
			}
		},
	}); err != nil {
		return fmt.Errorf("node authorizer: %w", err)
	}
	claims := f.Core().V1().PersistentVolumeClaims().Informer()
	setClaim := func(obj any) {
		if c, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			g.SetClaim(c.Namespace, c.Name, c.Spec.VolumeName)
		}
	}
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    setClaim,
		UpdateFunc: func(_, obj any) { setClaim(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				g.SetClaim(c.Namespace, c.Name, "")
			}
		},
	}); err != nil {
		return fmt.Errorf("node authorizer: %w", err)
	}
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced, claims.HasSynced) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("node authorizer: pod and claim informers did not sync within a minute")
	}
	return nil
}
