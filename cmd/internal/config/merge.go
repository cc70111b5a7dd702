package config

import (
	"errors"
	"fmt"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// Options change how the files read become a Set.
type Options struct {
	// MergeDomains joins the files that name the same domain into one
	// domain, as envoyproxy/ratelimit does with MERGE_DOMAIN_CONFIG=true,
	// so that teams can each own a file of a shared domain. Only the top
	// level is joined: a descriptor (key and value) that two files both
	// define is still an error, whatever lies under it, since neither file
	// could be said to win. Routes and trusted_proxies of a merged domain
	// may come from one of its files only. Without it a domain named by two
	// files is an error.
	MergeDomains bool
}

// parsed is one file decoded, waiting to be built alone or with the other
// files of its domain.
type parsed struct {
	d   *decoder
	doc document
}

// parseMerged builds one policy per domain from the files, in the order of
// each domain's first file, joining the files of a domain.
func parseMerged(files []file) ([]*policy.Policy, []error) {
	var errs []error
	groups := map[string][]parsed{}
	var order []string
	for _, fl := range files {
		d, node, err := read(fl.path, fl.data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		doc, err := d.document(node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if groups[doc.domain] == nil {
			order = append(order, doc.domain)
		}
		groups[doc.domain] = append(groups[doc.domain], parsed{d, doc})
	}
	var policies []*policy.Policy
	for _, domain := range order {
		p, err := merge(groups[domain])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		policies = append(policies, p)
	}
	return policies, errs
}

// merge builds the policy of the files of one domain: the first file's
// descriptors, then each next file's, each rule keeping the file it was
// written in.
func merge(group []parsed) (*policy.Policy, error) {
	first := group[0]
	if len(group) == 1 {
		return first.d.build(first.doc)
	}
	doc := first.doc
	doc.tree = nil
	var withRoutes *parsed
	seen := map[policy.Entry]string{} // top-level descriptor -> the file defining it
	var errs []error
	for i := range group {
		g := &group[i]
		if g.doc.routes != nil || g.doc.trusted != nil {
			if withRoutes != nil {
				errs = append(errs, &Error{File: g.d.file, Line: g.doc.domainLine,
					Msg: fmt.Sprintf("domain %q: routes or trusted_proxies are already given in %s; merged files of one domain may give them in one file only",
						g.doc.domain, withRoutes.d.file)})
				continue
			}
			withRoutes = g
		}
		for _, n := range g.doc.tree {
			e := policy.Entry{Key: n.Key, Value: n.Value}
			if other, ok := seen[e]; ok {
				errs = append(errs, &Error{File: g.d.file, Line: g.doc.domainLine,
					Msg: fmt.Sprintf("domain %q: descriptor %q is already defined in %s; merging joins a domain's files, not the descriptors they share",
						g.doc.domain, policy.JoinPath("", n.Key, n.Value), other)})
				continue
			}
			seen[e] = g.d.file
			if i > 0 {
				setFile(n, g.d.file)
			}
			doc.tree = append(doc.tree, n)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := policy.New(doc.domain, first.d.file, doc.domainLine, doc.tree)
	if withRoutes == nil {
		return p, nil
	}
	return withRoutes.d.addRoutes(withRoutes.doc, p)
}

// setFile records file as where the rules of n and its children were
// written, for a descriptor merged into a domain first defined elsewhere.
func setFile(n *policy.Node, file string) {
	for i := range n.Rules {
		n.Rules[i].File = file
	}
	for _, c := range n.Children {
		setFile(c, file)
	}
}
