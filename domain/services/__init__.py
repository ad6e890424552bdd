"""The use cases, one module per family, each a service over the one repository
(`storage/repository.py`: one load, one append) that `domain/application.py` wires:

- `turns.py`: chats and turns (start, send, resume, retry, withdraw, expire, continue),
  driven by the typed commands of `commands.py`;
- `forks.py`: forks and the beginning of an erasure;
- `keys.py`: personal data under erasable keys (what the store says is erased);
- `threads.py`: thread ids reserved before their chat;
- `channels.py`: a tenant's notification channels and Slack identity links;
- `webhooks.py`: webhook subscriptions;
- `io.py`: where blocking store work runs (the I/O threads) and the count of commands.
"""
