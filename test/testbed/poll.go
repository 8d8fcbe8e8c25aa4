package testbed

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// pollUntil checks cond every 200ms until it holds, it fails, ctx ends or
// timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}
