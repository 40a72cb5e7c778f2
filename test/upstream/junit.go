package upstream

import (
	"encoding/xml"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Result is one spec of a run as its JUnit report states it.
type Result struct {
	Name    string // the full spec name, without ginkgo's "[It] " prefix
	Status  string // passed, failed, skipped, pending, interrupted, ...
	Time    time.Duration
	Message string // the failure message of a failed spec
}

// Passed, Failed and Skipped are Result.Status values.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
)

type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit reads a ginkgo v2 JUnit report into the results of its specs, sorted by name.
// The suite's own nodes ([SynchronizedBeforeSuite], [ReportAfterSuite], ...) are results
// too, under their names: a failing BeforeSuite fails the run.
func ReadJUnit(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s junitSuites
	if err := xml.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Result
	for _, suite := range s.Suites {
		for _, c := range suite.Cases {
			r := Result{Name: strings.TrimPrefix(c.Name, "[It] "), Status: c.Status,
				Time: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				r.Message = c.Failure.Message
				if r.Status == "" {
					r.Status = Failed
				}
			case c.Error != nil:
				r.Message = c.Error.Message
				if r.Status == "" {
					r.Status = Failed
				}
			case c.Skipped != nil && r.Status == "":
				r.Status = Skipped
			case r.Status == "":
				r.Status = Passed
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
