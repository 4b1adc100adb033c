package framework

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTimeout bounds every wait in the integration suites. Waits poll a condition; none sleeps
// for a fixed time.
const DefaultTimeout = 30 * time.Second

const pollInterval = 100 * time.Millisecond

// WaitFor polls cond until it returns true, returns an error, or timeout passes. The last error
// from cond, if any, is part of the timeout error so a failing test says what it was waiting for.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// CreateAndWait creates obj through c and waits until reader (often a manager's cache) sees it.
func CreateAndWait(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Create(ctx, obj, opts...); err != nil {
		return fmt.Errorf("create %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	key := client.ObjectKeyFromObject(obj)
	probe := obj.DeepCopyObject().(client.Object)
	return WaitFor(ctx, DefaultTimeout, fmt.Sprintf("%T %s to be readable", obj, key), func(ctx context.Context) (bool, error) {
		return true, reader.Get(ctx, key, probe)
	})
}

// DeleteAndWait deletes obj and waits until reader no longer finds it (finalizers included).
func DeleteAndWait(ctx context.Context, c client.Client, reader client.Reader, obj client.Object) error {
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	key := client.ObjectKeyFromObject(obj)
	probe := obj.DeepCopyObject().(client.Object)
	return WaitFor(ctx, DefaultTimeout, fmt.Sprintf("%T %s to be gone", obj, key), func(ctx context.Context) (bool, error) {
		err := reader.Get(ctx, key, probe)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
