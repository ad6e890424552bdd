"""Agent Protocol: LangGraph clients drive Interlock's chats as threads and runs."""
