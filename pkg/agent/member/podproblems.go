package member

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// imageFailures are the waiting reasons of a container whose image cannot be had: the kubelet
// keeps retrying them, so the pods stay Pending with nothing else to say why.
var imageFailures = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}

// imageProblems says, pod by pod, which containers of the share's pods cannot get their image
// (a version for which the member has no image, say), sorted by pod name.
func imageProblems(pods []corev1.Pod) []string {
	var out []string
	for i := range pods {
		pod := &pods[i]
		statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil || !slices.Contains(imageFailures, w.Reason) {
				continue
			}
			msg := fmt.Sprintf("pod %s: container %s cannot get image %q (%s)", pod.Name, cs.Name, cs.Image, w.Reason)
			if m := strings.TrimSpace(w.Message); m != "" {
				msg += ": " + m
			}
			out = append(out, msg)
		}
	}
	slices.Sort(out)
	return out
}
