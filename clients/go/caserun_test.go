package punctual_test

// The Go reading of the conformance cases (clients/conformance/cases.json, whose "about" says
// what a step, a reference and a matcher are), as the TypeScript, PHP and Python runners read the
// same file: steps run through an adapter that calls the Go client, answers are held against what
// the case expects.
//
// What it decides: answers are compared as encoding/json decodes them (numbers are float64); a
// mismatch fails the case with the step, the path in the answer and both values; "until" polls
// every 100 ms up to "within" (15 s); "received" is read from the receiver here, it is not a
// client's call.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const (
	pollEvery     = 100 * time.Millisecond
	defaultWithin = 15_000
)

var reference = regexp.MustCompile(`^\$([A-Za-z_]\w*)((?:\.[^.]+)*)$`)

type step struct {
	Call        string         `json:"call"`
	With        map[string]any `json:"with"`
	Save        string         `json:"save"`
	Expect      any            `json:"expect"`
	ExpectError any            `json:"expectError"`
	Until       any            `json:"until"`
	Within      int            `json:"within"`
}

type conformanceCase struct {
	Name   string            `json:"name"`
	Checks string            `json:"checks"`
	Skip   map[string]string `json:"skip"`
	Steps  []step            `json:"steps"`
}

// caseRun runs one case. call answers the client's result as JSON values with the API's names;
// errorView the client's API error as the cases see it, nil for anything else.
type caseRun struct {
	testCase     conformanceCase
	placeholders map[string]string
	call         func(name string, args map[string]any) (any, error)
	errorView    func(err error) map[string]any
	saved        map[string]any
}

func (r *caseRun) run() error {
	r.saved = map[string]any{}
	for index, s := range r.testCase.Steps {
		label := fmt.Sprintf("%s, step %d (%s)", r.testCase.Name, index+1, s.Call)
		answer, err := r.step(s, label)
		if err != nil {
			return err
		}
		if s.Save != "" {
			r.saved[s.Save] = answer
		}
	}
	return nil
}

func (r *caseRun) step(s step, label string) (any, error) {
	resolved, err := r.resolve(s.With)
	if err != nil {
		return nil, err
	}
	args, _ := resolved.(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	call := func() (any, error) {
		if s.Call == "received" {
			return r.received(fmt.Sprint(args["name"]))
		}
		return r.call(s.Call, args)
	}
	if s.ExpectError != nil {
		answer, err := call()
		if err == nil {
			return nil, fmt.Errorf("%s: expected an error, got %s", label, show(answer))
		}
		view := r.errorView(err)
		if view == nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		return view, r.check(label, s.ExpectError, view)
	}
	answer, err := call()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	if s.Until != nil {
		until, err := r.resolve(s.Until)
		if err != nil {
			return nil, err
		}
		within := s.Within
		if within == 0 {
			within = defaultWithin
		}
		deadline := time.Now().Add(time.Duration(within) * time.Millisecond)
		for len(r.mismatches(until, answer, "")) > 0 {
			if time.Now().After(deadline) {
				return nil, r.check(fmt.Sprintf("%s, still after %d ms", label, within), s.Until, answer)
			}
			time.Sleep(pollEvery)
			if answer, err = call(); err != nil {
				return nil, fmt.Errorf("%s: %w", label, err)
			}
		}
	}
	if s.Expect != nil {
		return answer, r.check(label, s.Expect, answer)
	}
	return answer, nil
}

func (r *caseRun) check(label string, expected, answer any) error {
	resolved, err := r.resolve(expected)
	if err != nil {
		return err
	}
	if problems := r.mismatches(resolved, answer, ""); len(problems) > 0 {
		return fmt.Errorf("%s:\n  %s", label, strings.Join(problems, "\n  "))
	}
	return nil
}

// resolve answers the value with placeholders replaced in its strings and references taken.
func (r *caseRun) resolve(value any) (any, error) {
	switch v := value.(type) {
	case string:
		if parts := reference.FindStringSubmatch(v); parts != nil {
			return r.lookup(parts[1], parts[2])
		}
		for name, replacement := range r.placeholders {
			v = strings.ReplaceAll(v, "{"+name+"}", replacement)
		}
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			resolved, err := r.resolve(item)
			if err != nil {
				return nil, err
			}
			out[i] = resolved
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for key, item := range v {
			resolved, err := r.resolve(item)
			if err != nil {
				return nil, err
			}
			out[key] = resolved
		}
		return out, nil
	}
	return value, nil
}

func (r *caseRun) lookup(name, path string) (any, error) {
	value, ok := r.saved[name]
	if !ok {
		return nil, fmt.Errorf("the case refers to $%s, which no earlier step saved", name)
	}
	for _, segment := range strings.Split(path, ".")[1:] {
		switch v := value.(type) {
		case map[string]any:
			value, ok = v[segment]
		case []any:
			index, err := strconv.Atoi(segment)
			ok = err == nil && index >= 0 && index < len(v)
			if ok {
				value = v[index]
			}
		default:
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("$%s%s: the saved answer has no %s", name, path, segment)
		}
	}
	return value, nil
}

// mismatches lists where actual differs from expected (already resolved), one line each.
func (r *caseRun) mismatches(expected, actual any, at string) []string {
	here := at
	if here == "" {
		here = "the answer"
	}
	switch want := expected.(type) {
	case map[string]any:
		for key := range want {
			if strings.HasPrefix(key, "$") {
				return r.operator(want, actual, here)
			}
		}
		got, ok := actual.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an object, got %s", here, show(actual))}
		}
		var problems []string
		for key, item := range want {
			path := key
			if at != "" {
				path = at + "." + key
			}
			value, present := got[key]
			if !present {
				problems = append(problems, path+": missing from the answer")
				continue
			}
			problems = append(problems, r.mismatches(item, value, path)...)
		}
		return problems
	case []any:
		got, ok := actual.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an array, got %s", here, show(actual))}
		}
		if len(got) != len(want) {
			return []string{fmt.Sprintf("%s: expected %d items, got %d: %s", here, len(want), len(got), show(actual))}
		}
		var problems []string
		for i, item := range want {
			problems = append(problems, r.mismatches(item, got[i], fmt.Sprintf("%s.%d", at, i))...)
		}
		return problems
	}
	if reflect.DeepEqual(expected, actual) {
		return nil
	}
	return []string{fmt.Sprintf("%s: expected %s, got %s", here, show(expected), show(actual))}
}

func (r *caseRun) operator(expected map[string]any, actual any, here string) []string {
	var operator string
	var operand any
	for operator, operand = range expected {
	}
	fail := func(what string) []string {
		return []string{fmt.Sprintf("%s: expected %s, got %s", here, what, show(actual))}
	}
	text := fmt.Sprint(operand)
	switch operator {
	case "$type":
		kind := typeOf(actual)
		if kind == text || (text == "number" && kind == "integer") {
			return nil
		}
		return fail("a value of type " + text)
	case "$matches":
		if s, ok := actual.(string); ok && regexp.MustCompile(text).MatchString(s) {
			return nil
		}
		return fail("a string matching /" + text + "/")
	case "$contains":
		if s, ok := actual.(string); ok && strings.Contains(s, text) {
			return nil
		}
		return fail("a string containing " + show(operand))
	case "$length":
		if items, ok := actual.([]any); ok && float64(len(items)) == operand {
			return nil
		}
		return fail(text + " items")
	case "$not":
		if len(r.mismatches(operand, actual, "")) > 0 {
			return nil
		}
		return fail("anything but " + show(operand))
	}
	return []string{"unknown matcher " + operator}
}

func typeOf(value any) string {
	switch v := value.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

func (r *caseRun) received(name string) (any, error) {
	resp, err := http.Get(r.placeholders["receiver"] + "/received/" + url.PathEscape(name))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body any
	return body, json.NewDecoder(resp.Body).Decode(&body)
}

func show(value any) string {
	text, err := json.Marshal(value)
	if err != nil {
		return fmt.Sprint(value)
	}
	return string(text)
}
