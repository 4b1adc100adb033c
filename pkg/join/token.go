package join

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serviceAccountGoneTimeout bounds the wait for a deleted ServiceAccount to disappear. It has no
// finalizers, so the wait is normally over at once.
const serviceAccountGoneTimeout = 30 * time.Second

// replaceServiceAccount makes sure the agent's ServiceAccount is new: an existing one is deleted
// (its UID as precondition) and created again. Bound service account tokens name the UID of their
// ServiceAccount, so every token minted for the old one stops authenticating: this is how a
// re-join revokes the previous credential. It returns the UID of the ServiceAccount it replaced,
// empty when there was none.
func replaceServiceAccount(ctx context.Context, c client.Client, sa *corev1.ServiceAccount) (types.UID, error) {
	key := client.ObjectKeyFromObject(sa)
	old := &corev1.ServiceAccount{}
	var oldUID types.UID
	switch err := c.Get(ctx, key, old); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("get ServiceAccount %s: %w", key, err)
	default:
		oldUID = old.UID
		if err := c.Delete(ctx, old, client.Preconditions{UID: &oldUID}); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("delete ServiceAccount %s to revoke its tokens: %w", key, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, serviceAccountGoneTimeout, true, func(ctx context.Context) (bool, error) {
			probe := &corev1.ServiceAccount{}
			err := c.Get(ctx, key, probe)
			if apierrors.IsNotFound(err) || (err == nil && probe.UID != oldUID) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return "", fmt.Errorf("wait for ServiceAccount %s (uid %s) to be deleted: %w", key, oldUID, err)
		}
	}
	if err := apply(ctx, c, sa); err != nil {
		return "", err
	}
	return oldUID, nil
}

// MintToken asks the TokenRequest API (serviceaccounts/token) for a token of sa that lives for
// expiration, or less if the API server caps token lifetimes.
func MintToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, expiration time.Duration) (string, time.Time, error) {
	seconds := int64(expiration / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", time.Time{}, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	if tr.Status.Token == "" {
		return "", time.Time{}, fmt.Errorf("the API server returned no token for ServiceAccount %s/%s", sa.Namespace, sa.Name)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}
