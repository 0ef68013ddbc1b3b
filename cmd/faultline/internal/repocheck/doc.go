// Package repocheck holds checks over the repository's own text that no
// one package owns (go test runs them with the rest). It has no code.
package repocheck
