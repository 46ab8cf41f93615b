SET @punctual_0022 = (SELECT IF(table_type = 'VIEW', 'task_runs', 'punctual_task_runs') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_task_runs');--> statement-breakpoint
SET @punctual_0022_sql = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE table_schema = DATABASE() AND table_name = @punctual_0022 AND column_name = 'result'), 'DO 0', CONCAT('ALTER TABLE `', @punctual_0022, '` ADD `result` varchar(200), ADD INDEX `task_runs_finished` (`finished_at`)'));--> statement-breakpoint
PREPARE punctual_0022 FROM @punctual_0022_sql;--> statement-breakpoint
EXECUTE punctual_0022;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0022;--> statement-breakpoint
SET @punctual_0022_sql = IF(@punctual_0022 = 'task_runs', 'CREATE OR REPLACE SQL SECURITY INVOKER VIEW `punctual_task_runs` AS SELECT * FROM `task_runs`', 'DO 0');--> statement-breakpoint
PREPARE punctual_0022 FROM @punctual_0022_sql;--> statement-breakpoint
EXECUTE punctual_0022;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0022;--> statement-breakpoint
SET @punctual_0022 = (SELECT IF(table_type = 'VIEW', 'tasks', 'punctual_tasks') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks');--> statement-breakpoint
SET @punctual_0022_sql = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE table_schema = DATABASE() AND table_name = @punctual_0022 AND column_name = 'last_result'), 'DO 0', CONCAT('ALTER TABLE `', @punctual_0022, '` ADD `last_result` varchar(200)'));--> statement-breakpoint
PREPARE punctual_0022 FROM @punctual_0022_sql;--> statement-breakpoint
EXECUTE punctual_0022;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0022;--> statement-breakpoint
SET @punctual_0022_sql = IF(@punctual_0022 = 'tasks', 'CREATE OR REPLACE SQL SECURITY INVOKER VIEW `punctual_tasks` AS SELECT * FROM `tasks`', 'DO 0');--> statement-breakpoint
PREPARE punctual_0022 FROM @punctual_0022_sql;--> statement-breakpoint
EXECUTE punctual_0022;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0022;
