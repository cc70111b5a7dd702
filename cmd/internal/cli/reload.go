package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/watch"
)

// reloadFlags say when a reloaded policy may replace the one in force.
// Without them the policy never silently disappears: a configuration that
// holds no policy is refused at start-up and on reload, and a change seen
// by the file watcher that drops domains or limits (a half-written file, a
// file deleted by mistake) waits for the operator to confirm it.
type reloadFlags struct {
	allowEmpty  bool // --allow-empty-config
	allowShrink bool // --config-allow-shrink
	merge       bool // --merge-domains
}

func (f *reloadFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&f.allowEmpty, "allow-empty-config", false,
		"accept a --config that holds no policy file (an empty directory), at start-up and on reload; "+
			"without it that is an error and a reload to it keeps the policy in force")
	fl.BoolVar(&f.allowShrink, "config-allow-shrink", false,
		"apply a change seen in the --config files even when it drops domains or limits; "+
			"without it such a change is held back until SIGHUP or POST /admin/reload")
	registerMerge(fl, &f.merge)
}

// registerMerge registers --merge-domains, which serve, proxy and config
// check share so that a check gives the verdict the service would.
func registerMerge(fl *pflag.FlagSet, merge *bool) {
	fl.BoolVar(merge, "merge-domains", false,
		"join the --config files that name the same domain into one domain, as envoyproxy/ratelimit's "+
			"MERGE_DOMAIN_CONFIG=true does; a top-level descriptor defined in two of them is still an error. "+
			"Without it a domain named by two files is an error")
}

// parse builds the Set of files read from path, refusing one that holds
// no policy unless --allow-empty-config allows it.
func (f reloadFlags) parse(files *config.Files) (*policy.Set, error) {
	set, err := files.ParseWith(config.Options{MergeDomains: f.merge})
	switch {
	case err == nil:
		return set, nil
	case !errors.Is(err, config.ErrNoPolicy):
		return nil, err
	case f.allowEmpty:
		return policy.NewSet()
	}
	return nil, fmt.Errorf("%w (--allow-empty-config runs without one)", err)
}

// requireRoutes is what the proxy asks of a policy: routes, without which
// it would limit nothing, unless --allow-empty-config allows that.
func requireRoutes(path string, flags reloadFlags) func(*policy.Set) error {
	return func(set *policy.Set) error {
		if len(set.Routes()) == 0 && !flags.allowEmpty {
			return fmt.Errorf("--config %s: no routes: without a routes section the proxy would limit nothing", path)
		}
		return nil
	}
}

// errHeldBack is the outcome of a watched reload that would drop domains
// or limits without --config-allow-shrink.
var errHeldBack = errors.New("held back: the change drops domains or limits in force")

// policyHolder is where the policy in force lives: the engine.
type policyHolder interface {
	Policies() *policy.Set
	Reload(*policy.Set)
}

// reloader reloads the policy of serve and proxy, from the file watcher
// (watched) or at the operator's word (explicit: SIGHUP, POST
// /admin/reload). One reload runs at a time.
type reloader struct {
	path    string // --config; "" for serve's built-in example policy
	flags   reloadFlags
	holder  policyHolder
	check   func(*policy.Set) error // what else the service needs of a policy; nil: nothing
	counted func(ok bool)           // the reload metric; nil: none
	log     *slog.Logger
	after   func(time.Duration) <-chan time.Time // time.After; tests bring their clock

	mu sync.Mutex
}

// explicit reloads at the operator's word: the files are read once and
// applied even when they drop domains or limits (not when they hold no
// policy, unless --allow-empty-config).
func (r *reloader) explicit() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	set, err := loadPolicies(r.path, r.flags)
	return r.apply(set, err, true)
}

// watched reloads on a change the watcher saw. The files are read until
// two reads watch.Settle apart find the same bytes, so that a file still
// being written is not loaded; a change that drops domains or limits is
// held back unless --config-allow-shrink.
func (r *reloader) watched(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	files, err := r.settled(ctx)
	if ctx.Err() != nil {
		return err // shutting down: not a failed reload
	}
	if err != nil {
		r.count(false)
		r.log.Error("config reload failed; keeping the policies in force", "error", err)
		return err
	}
	set, err := r.flags.parse(files)
	return r.apply(set, err, r.flags.allowShrink)
}

// settled reads the files until two reads watch.Settle apart agree, for
// at most watch.MaxWait: past that the files are left to the next change
// the watcher sees.
func (r *reloader) settled(ctx context.Context) (*config.Files, error) {
	files := config.ReadFiles(r.path)
	for waited := time.Duration(0); waited < watch.MaxWait; waited += watch.Settle {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.after(watch.Settle):
		}
		again := config.ReadFiles(r.path)
		if again.Digest() == files.Digest() {
			return again, nil
		}
		files = again
	}
	return nil, fmt.Errorf("%s: still being written after %v: not loaded", r.path, watch.MaxWait)
}

// apply puts set in force unless err, the service's check, or a loss of
// domains or limits not allowed (shrink false) stops it.
func (r *reloader) apply(set *policy.Set, err error, shrink bool) error {
	if err == nil && r.check != nil {
		err = r.check(set)
	}
	if err != nil {
		r.count(false)
		r.log.Error("config reload failed; keeping the policies in force", "error", err)
		return err
	}
	lost := policyLoss(r.holder.Policies(), set)
	if !lost.none() && !shrink {
		r.count(false)
		r.log.Warn("config change held back: it drops domains or limits in force; send SIGHUP or POST /admin/reload to apply it, or run with --config-allow-shrink",
			"config", r.path, "dropped_domains", capped(lost.domains), "dropped_limits", capped(lost.limits))
		return errHeldBack
	}
	r.holder.Reload(set)
	r.count(true)
	attrs := []any{"domains", set.Domains(), "routes", len(set.Routes())}
	if !lost.none() {
		attrs = append(attrs, "dropped_domains", capped(lost.domains), "dropped_limits", capped(lost.limits))
	}
	r.log.Info("config reloaded", attrs...)
	return nil
}

func (r *reloader) count(ok bool) {
	if r.counted != nil {
		r.counted(ok)
	}
}

// loss is what a new policy drops from the one in force: whole domains,
// and limits of the domains it keeps, each named by its descriptor's path
// ("api.tenant_free.user"), once per limit dropped.
type loss struct {
	domains, limits []string
}

func (l loss) none() bool { return len(l.domains) == 0 && len(l.limits) == 0 }

// policyLoss compares the limits per descriptor path of two Sets. A limit
// whose values change is not a loss; one that goes, from a descriptor that
// had several, is.
func policyLoss(old, new *policy.Set) loss {
	var l loss
	for _, domain := range old.Domains() {
		was, _ := old.Policy(domain)
		now, ok := new.Policy(domain)
		if !ok {
			l.domains = append(l.domains, domain)
			continue
		}
		left := map[string]int{}
		for _, rule := range now.Rules() {
			left[rule.Path]++
		}
		for _, rule := range was.Rules() {
			if left[rule.Path] > 0 {
				left[rule.Path]--
				continue
			}
			l.limits = append(l.limits, rule.Path)
		}
	}
	return l
}

// maxListed is how many names a log line lists before it says how many
// more there are.
const maxListed = 10

func capped(names []string) []string {
	if len(names) <= maxListed {
		return names
	}
	return append(names[:maxListed:maxListed], fmt.Sprintf("... and %d more", len(names)-maxListed))
}
