package main

import "errors"

func runLive(args []string) error { return errors.New("todo") }
