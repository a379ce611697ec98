package main

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// apiServing returns a channel closed once the API server of the admin kubeconfig answers GET /readyz
// with "ok" (polled every 250 ms until ctx ends; the kubeconfig is written before the server serves).
func apiServing(ctx context.Context, kubeconfig string) <-chan struct{} {
	ready := make(chan struct{})
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if apiReadyz(ctx, kubeconfig) {
				close(ready)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ready
}

func apiReadyz(ctx context.Context, kubeconfig string) bool {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return false
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}
