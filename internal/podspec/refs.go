package podspec

import (
	v1 "k8s.io/api/core/v1"
)

// VisitSecretNames calls visit with the name of every Secret pod refers to, in spec order, a name
// possibly more than once: image pull secrets, secret volumes and projected secret sources, the secrets
// volume plugins read (azureFile, cephfs, cinder, flexVolume, rbd, iscsi, scaleIO, storageos, csi's
// nodePublishSecretRef), and the env and envFrom secret references of every init, regular and ephemeral
// container. It is upstream's VisitPodSecretNames (k8s.io/kubernetes pkg/api/v1/pod) for the node
// authorizer's graph and the kubelet's object cache alike. Empty names are skipped.
func VisitSecretNames(pod *v1.Pod, visit func(name string)) {
	add := func(name string) {
		if name != "" {
			visit(name)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add(v.Secret.SecretName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		case v.AzureFile != nil:
			add(v.AzureFile.SecretName)
		case v.CephFS != nil && v.CephFS.SecretRef != nil:
			add(v.CephFS.SecretRef.Name)
		case v.Cinder != nil && v.Cinder.SecretRef != nil:
			add(v.Cinder.SecretRef.Name)
		case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
			add(v.FlexVolume.SecretRef.Name)
		case v.RBD != nil && v.RBD.SecretRef != nil:
			add(v.RBD.SecretRef.Name)
		case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
			add(v.ISCSI.SecretRef.Name)
		case v.ScaleIO != nil && v.ScaleIO.SecretRef != nil:
			add(v.ScaleIO.SecretRef.Name)
		case v.StorageOS != nil && v.StorageOS.SecretRef != nil:
			add(v.StorageOS.SecretRef.Name)
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			add(v.CSI.NodePublishSecretRef.Name)
		}
	}
	visitEnv(pod, func(ef v1.EnvFromSource) {
		if ef.SecretRef != nil {
			add(ef.SecretRef.Name)
		}
	}, func(e v1.EnvVarSource) {
		if e.SecretKeyRef != nil {
			add(e.SecretKeyRef.Name)
		}
	})
}

// VisitConfigMapNames calls visit with the name of every ConfigMap pod refers to, in spec order, a name
// possibly more than once: configMap volumes and projected configMap sources, and the env and envFrom
// configMap references of every init, regular and ephemeral container (upstream's
// VisitPodConfigmapNames). Empty names are skipped.
func VisitConfigMapNames(pod *v1.Pod, visit func(name string)) {
	add := func(name string) {
		if name != "" {
			visit(name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add(v.ConfigMap.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add(src.ConfigMap.Name)
				}
			}
		}
	}
	visitEnv(pod, func(ef v1.EnvFromSource) {
		if ef.ConfigMapRef != nil {
			add(ef.ConfigMapRef.Name)
		}
	}, func(e v1.EnvVarSource) {
		if e.ConfigMapKeyRef != nil {
			add(e.ConfigMapKeyRef.Name)
		}
	})
}

// visitEnv calls envFrom for every envFrom source and valueFrom for every env valueFrom of the pod's
// init, regular and ephemeral containers.
func visitEnv(pod *v1.Pod, envFrom func(v1.EnvFromSource), valueFrom func(v1.EnvVarSource)) {
	each := func(efs []v1.EnvFromSource, env []v1.EnvVar) {
		for _, ef := range efs {
			envFrom(ef)
		}
		for _, e := range env {
			if e.ValueFrom != nil {
				valueFrom(*e.ValueFrom)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		each(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		each(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		each(c.EnvFrom, c.Env)
	}
}
