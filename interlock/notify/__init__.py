"""Notifications to approvers by email and Slack, fed from the log through an outbox."""
