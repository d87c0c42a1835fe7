#!/bin/sh
kubectl apply -f .
