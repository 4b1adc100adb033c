package framework

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/internal/process"
)

// DefaultTimeout bounds every wait in the integration suites. Waits poll a condition; none sleeps
// for a fixed time.
const DefaultTimeout = 30 * time.Second

// WaitFor polls cond (every 100 ms, with process.Wait) until it returns true, or timeout passes;
// an error from cond is retried. The last error from cond, if any, is part of the timeout error
// so a failing test says what it was waiting for.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	return process.Wait(ctx, what, timeout, func(ctx context.Context) error {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return process.ErrNotReady
		}
		return nil
	})
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
