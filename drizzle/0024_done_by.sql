SET @punctual_0024 = (SELECT IF(table_type = 'VIEW', 'tasks', 'punctual_tasks') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks');--> statement-breakpoint
SET @punctual_0024_sql = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE table_schema = DATABASE() AND table_name = @punctual_0024 AND column_name = 'done_by'), 'DO 0', CONCAT('ALTER TABLE `', @punctual_0024, '` ADD `done_by` varchar(64), ADD `wait_reason` enum(''pause'',''limit'')'));--> statement-breakpoint
PREPARE punctual_0024 FROM @punctual_0024_sql;--> statement-breakpoint
EXECUTE punctual_0024;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0024;--> statement-breakpoint
SET @punctual_0024_sql = IF(@punctual_0024 = 'tasks', 'CREATE OR REPLACE SQL SECURITY INVOKER VIEW `punctual_tasks` AS SELECT * FROM `tasks`', 'DO 0');--> statement-breakpoint
PREPARE punctual_0024 FROM @punctual_0024_sql;--> statement-breakpoint
EXECUTE punctual_0024;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0024;
