package sampler

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownModel is returned for a model that is neither a configured
// "provider/model" ID, an alias, nor the bare name of exactly one
// configured model.
var ErrUnknownModel = errors.New("unknown model")

// ErrAmbiguousModel is returned for a bare model name that several
// providers offer; its message names the candidates.
var ErrAmbiguousModel = errors.New("ambiguous model")

// Model is one configured model. Scores are in [0,1], higher is better:
// Cost 1 is the cheapest, Speed 1 the fastest, Intelligence 1 the most able.
type Model struct {
	// Provider is the provider's name; Name its own model name. The model's
	// ID is "Provider/Name".
	Provider     string   `json:"provider"`
	Name         string   `json:"name"`
	Aliases      []string `json:"aliases,omitempty"`
	Cost         float64  `json:"cost"`
	Speed        float64  `json:"speed"`
	Intelligence float64  `json:"intelligence"`
	// Fallbacks are model IDs tried, in order, when this one fails upstream.
	Fallbacks []string `json:"fallbacks,omitempty"`
}

// ID returns "provider/name".
func (m Model) ID() string { return m.Provider + "/" + m.Name }

// Catalog is the set of configured models and the rules that choose one for
// a request. Build it with NewCatalog; it is immutable afterwards.
type Catalog struct {
	models  []Model
	byID    map[string]int
	aliases map[string]int
	// byName lists, per bare model name, the models of that name in
	// configuration order.
	byName map[string][]int
	def    int
}

// NewCatalog indexes models. defaultID names the default model (an ID or
// alias); empty means the first model. It trusts the rules config.Load
// checks: IDs and aliases unique, fallbacks and the default configured.
func NewCatalog(models []Model, defaultID string) *Catalog {
	c := &Catalog{models: models, byID: map[string]int{}, aliases: map[string]int{}, byName: map[string][]int{}}
	for i, m := range models {
		c.byID[m.ID()] = i
		c.byName[m.Name] = append(c.byName[m.Name], i)
		for _, a := range m.Aliases {
			c.aliases[a] = i
		}
	}
	c.def, _ = c.lookup(defaultID)
	return c
}

func (c *Catalog) lookup(spec string) (int, bool) {
	if i, ok := c.byID[spec]; ok {
		return i, true
	}
	i, ok := c.aliases[spec]
	return i, ok
}

// resolve finds a model by ID, alias or, failing both, bare name: the
// name a provider knows the model by, when exactly one provider offers it.
func (c *Catalog) resolve(spec string) (int, error) {
	if i, ok := c.lookup(spec); ok {
		return i, nil
	}
	switch named := c.byName[spec]; len(named) {
	case 0:
		return 0, fmt.Errorf("%w %q", ErrUnknownModel, spec)
	case 1:
		return named[0], nil
	default:
		ids := make([]string, len(named))
		for k, i := range named {
			ids[k] = c.models[i].ID()
		}
		return 0, fmt.Errorf("%w %q: offered by %s; name one of them", ErrAmbiguousModel, spec, strings.Join(ids, ", "))
	}
}

// Models returns the configured models in configuration order.
func (c *Catalog) Models() []Model { return append([]Model(nil), c.models...) }

// Default returns the default model.
func (c *Catalog) Default() Model { return c.models[c.def] }

// Lookup finds a model by ID ("provider/name"), alias, or bare name (the
// name its provider knows it by, e.g. "gpt-4o-mini") when exactly one
// provider offers a model of that name. An ID or alias wins over a bare
// name. The error wraps ErrUnknownModel, or ErrAmbiguousModel with the
// candidate IDs when several providers offer the bare name.
func (c *Catalog) Lookup(spec string) (Model, error) {
	i, err := c.resolve(spec)
	if err != nil {
		return Model{}, err
	}
	return c.models[i], nil
}

// Known reports whether id is a configured model ID; metrics use it to
// bound the model label.
func (c *Catalog) Known(id string) bool {
	_, ok := c.byID[id]
	return ok
}

// Select chooses the model for a request. An explicit spec wins; otherwise
// the hints of prefs are tried in order, each a substring of configured model
// IDs, and the first hint that matches picks among its matches by the
// priorities; with no matching hint the priorities pick among all models;
// with no priorities either, the default. Ties go to the model configured
// first.
func (c *Catalog) Select(spec string, prefs *ModelPreferences) (Model, error) {
	if spec != "" {
		return c.Lookup(spec)
	}
	if prefs == nil {
		return c.Default(), nil
	}
	for _, h := range prefs.Hints {
		name := strings.ToLower(h.Name)
		if name == "" {
			continue
		}
		var matches []int
		for i, m := range c.models {
			if strings.Contains(strings.ToLower(m.ID()), name) {
				matches = append(matches, i)
			}
		}
		if len(matches) > 0 {
			return c.models[c.best(matches, prefs)], nil
		}
	}
	if prefs.CostPriority == nil && prefs.SpeedPriority == nil && prefs.IntelligencePriority == nil {
		return c.Default(), nil
	}
	all := make([]int, len(c.models))
	for i := range all {
		all[i] = i
	}
	return c.models[c.best(all, prefs)], nil
}

// best returns the candidate with the highest weighted score; the first
// wins a tie.
func (c *Catalog) best(candidates []int, prefs *ModelPreferences) int {
	weight := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	wc, ws, wi := weight(prefs.CostPriority), weight(prefs.SpeedPriority), weight(prefs.IntelligencePriority)
	best, bestScore := candidates[0], -1.0
	for _, i := range candidates {
		m := c.models[i]
		score := wc*m.Cost + ws*m.Speed + wi*m.Intelligence
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}
