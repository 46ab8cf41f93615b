SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_tasks` AS SELECT * FROM `tasks`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'tasks' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_task_tags` AS SELECT * FROM `task_tags`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'task_tags' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_task_tags'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_type_controls` AS SELECT * FROM `type_controls`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'type_controls' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_type_controls'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_members` AS SELECT * FROM `members`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'members' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_members'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_shard_leases` AS SELECT * FROM `shard_leases`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'shard_leases' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_shard_leases'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_task_runs` AS SELECT * FROM `task_runs`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'task_runs' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_task_runs'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_audit_log` AS SELECT * FROM `audit_log`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'audit_log' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_audit_log'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;--> statement-breakpoint
SET @punctual_0020 = (SELECT IF(COUNT(*) = 1, 'CREATE SQL SECURITY INVOKER VIEW `punctual_limit_slots` AS SELECT * FROM `limit_slots`', 'DO 0') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'limit_slots' AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_limit_slots'));--> statement-breakpoint
PREPARE punctual_0020 FROM @punctual_0020;--> statement-breakpoint
EXECUTE punctual_0020;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0020;
