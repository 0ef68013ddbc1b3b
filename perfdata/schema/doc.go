// Package schema is the contract between faultline record and the
// analysis: the names and fields of the events a recording carries beyond
// perf's own, the allocator entry points they stand for, and which files
// count as system code.
//
// The recorder writes what this package names and the analysis
// (attribute/analyze, attribute/report) reads it; neither imports the
// other. A recording made with perf record and perf probe follows the same
// names (perf probe's event names, the syscalls tracepoints), so the
// analysis reads both.
//
// The package depends on nothing in faultline: it sits below perfdata's
// users on the data flow perfdata → symbolize → attribute.
package schema
