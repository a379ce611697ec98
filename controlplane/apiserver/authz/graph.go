package authz

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// PodsOnNode lists the pods in namespace bound to node (spec.nodeName), read from the API server's own
// storage.
type PodsOnNode func(ctx context.Context, namespace, node string) ([]corev1.Pod, error)

// referencedBy reports whether one of pods refers to the secret or configmap name: through a volume
// (also projected), an env or envFrom source of any container, or (secrets) an image pull secret. This is
// the part of Kubernetes' Node authorizer graph that decides which secrets and configmaps a node may read.
func referencedBy(pods []corev1.Pod, resource, name string) bool {
	for i := range pods {
		if podRefers(&pods[i], resource, name) {
			return true
		}
	}
	return false
}

func podRefers(p *corev1.Pod, resource, name string) bool {
	secret := resource == "secrets"
	if secret {
		for _, s := range p.Spec.ImagePullSecrets {
			if s.Name == name {
				return true
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case secret && v.Secret != nil && v.Secret.SecretName == name:
			return true
		case !secret && v.ConfigMap != nil && v.ConfigMap.Name == name:
			return true
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if (secret && src.Secret != nil && src.Secret.Name == name) || (!secret && src.ConfigMap != nil && src.ConfigMap.Name == name) {
					return true
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if (secret && e.SecretRef != nil && e.SecretRef.Name == name) || (!secret && e.ConfigMapRef != nil && e.ConfigMapRef.Name == name) {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if (secret && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name) ||
				(!secret && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == name) {
				return true
			}
		}
	}
	return false
}
