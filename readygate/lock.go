package readygate

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// watchedLock is the Lease lock, its failed calls counted
// (llmdiag_readiness_gate_lease_errors_total{op}) and warned about once
// per run of failures: client-go's leader election retries them without a
// word to its caller, so a missing RBAC rule would otherwise only show as
// a replica that never leads.
type watchedLock struct {
	resourcelock.Interface
	g *Gate

	mu      sync.Mutex
	failing map[string]bool
}

var _ resourcelock.Interface = (*watchedLock)(nil)

func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, b, err := l.Interface.Get(ctx)
	if apierrors.IsNotFound(err) {
		l.note("get", nil) // no Lease yet: it is created next
	} else {
		l.note("get", err)
	}
	return r, b, err
}

func (l *watchedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.note("create", err)
	return err
}

func (l *watchedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	l.note("update", err)
	return err
}

// note counts a failed call and warns at the first of a run; a conflict
// (another replica wrote first) or a cancelled call is no failure.
func (l *watchedLock) note(op string, err error) {
	if err != nil && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return // another replica wrote first, or the call was given up
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		if l.failing[op] {
			l.g.log.Info("readiness gate: the Lease answers again", "op", op)
		}
		delete(l.failing, op)
		return
	}
	l.g.m.leaseErrors.WithLabelValues(op).Inc()
	if !l.failing[op] {
		l.failing[op] = true
		l.g.log.Warn("readiness gate: the Lease refused a call (is the RBAC in place? create, get and update on leases); retrying", "op", op,
			"lease", l.g.o.LeaseNamespace+"/"+l.g.o.LeaseName, "err", err)
	}
}
