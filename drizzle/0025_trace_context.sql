SET @punctual_0025 = (SELECT IF(table_type = 'VIEW', 'tasks', 'punctual_tasks') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks');--> statement-breakpoint
SET @punctual_0025_sql = IF(EXISTS (SELECT 1 FROM information_schema.COLUMNS WHERE table_schema = DATABASE() AND table_name = @punctual_0025 AND column_name = 'trace_parent'), 'DO 0', CONCAT('ALTER TABLE `', @punctual_0025, '` ADD `trace_parent` varchar(55), ADD `trace_state` varchar(512)'));--> statement-breakpoint
PREPARE punctual_0025 FROM @punctual_0025_sql;--> statement-breakpoint
EXECUTE punctual_0025;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0025;--> statement-breakpoint
SET @punctual_0025_sql = IF(@punctual_0025 = 'tasks', 'CREATE OR REPLACE SQL SECURITY INVOKER VIEW `punctual_tasks` AS SELECT * FROM `tasks`', 'DO 0');--> statement-breakpoint
PREPARE punctual_0025 FROM @punctual_0025_sql;--> statement-breakpoint
EXECUTE punctual_0025;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0025;
